#!/usr/bin/env python3
"""Latency of one pallas evaluation (deviceless TPU compile + interpret-mode correctness).

    python3 bench/pallas_latency.py [--kernelgym build/cli/kernelgym] [--repeats 3] [TASK ...]
    python3 bench/pallas_latency.py --fork-server-comparison 3 [TASK ...]

Two ways, side by side in one run:

* cold: `kernelgym eval --backend pallas --json`, one process per evaluation: the worker's start
  (import jax, open the TPU target) and the reference's full-size estimate compile are paid each time.
* warm: a `kernelgym serve --local-runner-backends pallas` server and one env per task: the first
  step pays the reference estimate once; later steps find a pre-started worker. Each step sends
  the starter with a new comment line, so nothing is served from the reuse cache.

Prints one row per task with the median wall seconds and the worker's stage breakdown of the
cold run (reference, tpu compile, correctness). Standard library only, plus the kernelgym Python
package for the warm path (scripts/python_venv.sh installs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TASKS = ["cpu/silu_mul", "cpu/softmax_rows", "jaxbench-p/gemm", "jaxbench-p/flash_attention",
                 "jaxbench-k/gemm_add_relu", "models/rmsnorm_residual"]


def cold(kernelgym: str, task: str) -> tuple[float, dict]:
    start = time.perf_counter()
    run = subprocess.run([kernelgym, "eval", "--task", task, "--backend", "pallas", "--json"],
                         capture_output=True, text=True)
    wall = time.perf_counter() - start
    result = json.loads(run.stdout)
    if result["status"] != "ok":
        raise SystemExit(f"{task}: {result['status']}: {result['message']}")
    return wall, result["stage_seconds"]


def machine_busy_seconds() -> float:
    """CPU-seconds the whole machine has been busy since boot (/proc/stat): the difference over a
    run is what the run cost, on a machine that is otherwise quiet. (The server's own rusage
    misses its runners' workers, which are killed, not reaped, when it stops.)"""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def warm(kernelgym: str, tasks: list[str], repeats: int, env: dict | None = None) -> dict[str, tuple[float, float]]:
    """Per task: the first step's and the median later step's wall seconds."""
    sys.path.insert(0, str(REPO / "python"))
    import kernelgym as kg
    with tempfile.TemporaryDirectory() as tmp:
        endpoint_file = Path(tmp) / "endpoints.json"
        server = subprocess.Popen([kernelgym, "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind",
                                   "tcp://127.0.0.1:*", "--local-runners", "1", "--local-runner-backends", "pallas",
                                   "--endpoint-file", str(endpoint_file)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            while not endpoint_file.exists():
                time.sleep(0.1)
            endpoints = json.loads(endpoint_file.read_text())
            client = kg.Client(endpoints["clients"], timeout_s=600)
            out = {}
            for task in tasks:
                env = client.make(task, backend="pallas", max_steps=repeats + 2)
                starter = client.get_task(task)["versions"]["pallas"]["starter_source"]
                start = time.perf_counter()
                client.reset(env["env"], seed=1)
                first = time.perf_counter() - start
                steps = []
                for i in range(repeats):
                    start = time.perf_counter()
                    step = client.step(env["env"], kg.protocol.replace(f"# variant {i}\n{starter}"))
                    steps.append(time.perf_counter() - start)
                    if step["observation"]["status"] != "ok":
                        raise SystemExit(f"{task}: {step['observation']['text']}")
                client.close_env(env["env"])
                out[task] = (first, statistics.median(steps))
            client.close()
            return out
        finally:
            server.terminate()
            server.wait(timeout=60)


def fork_server_comparison(kernelgym: str, tasks: list[str], repeats: int, rounds: int) -> None:
    """The same served steps with the judge and tracer forked by fork servers, and started as a
    process per job, alternating; the machine's busy CPU-seconds per step (run it on a quiet
    machine)."""
    steps = len(tasks) * (repeats + 1)
    results = {"fork server": [], "process per job": []}
    for _ in range(rounds):
        for mode, flag in (("fork server", "1"), ("process per job", "0")):
            start, busy = time.perf_counter(), machine_busy_seconds()
            warm(kernelgym, tasks, repeats, env=dict(os.environ, KERNELGYM_PALLAS_FORK_SERVER=flag))
            results[mode].append((time.perf_counter() - start, machine_busy_seconds() - busy))
    print(f"# {os.cpu_count()} vCPU; {len(tasks)} tasks x {repeats + 1} steps = {steps} evaluations per run, "
          f"{rounds} runs each, alternating; server start and stop included; machine busy CPU-seconds")
    print("| judge and tracer | wall per evaluation (s) | CPU-seconds per evaluation |")
    print("|---|---|---|")
    for mode, runs in results.items():
        print(f"| {mode} | {statistics.median(w for w, _ in runs) / steps:.2f} | "
              f"{statistics.median(c for _, c in runs) / steps:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fork-server-comparison", type=int, metavar="ROUNDS", default=0,
                        help="only compare served CPU-seconds with and without fork servers, ROUNDS runs each")
    parser.add_argument("tasks", nargs="*", default=DEFAULT_TASKS)
    args = parser.parse_args()
    if args.fork_server_comparison:
        fork_server_comparison(args.kernelgym, args.tasks, args.repeats, args.fork_server_comparison)
        return 0
    rows = {}
    for task in args.tasks:
        walls, stages = [], []
        for _ in range(args.repeats):
            wall, stage_seconds = cold(args.kernelgym, task)
            walls.append(wall)
            stages.append(stage_seconds)
        median = lambda key: statistics.median(s.get(key, 0.0) for s in stages)  # noqa: E731
        rows[task] = (statistics.median(walls), median("worker_wait"), median("reference"), median("tpu_compile"),
                      median("correctness"))
    served = warm(args.kernelgym, args.tasks, args.repeats)
    print(f"# {os.cpu_count()} vCPU; median of {args.repeats}; seconds")
    print("| task | cold eval | worker start | reference (+ estimate) | TPU compile | interpret check | "
          "served: first step | served: later steps |")
    print("|---|---|---|---|---|---|---|---|")
    for task, (wall, start, reference, compile_s, check) in rows.items():
        first, later = served[task]
        print(f"| {task} | {wall:.2f} | {start:.2f} | {reference:.2f} | {compile_s:.2f} | {check:.2f} | "
              f"{first:.2f} | {later:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
