#!/usr/bin/env python3
"""Served cpu evaluations per core-second, two builds side by side (docs/benchmarks.md, issue #35).

For each runner count R (default 1 2 4) and each build (alternating which goes first, so drift of
the machine affects both alike): `kernelgym serve --local-runners R`, R envs made and reset (the
reset evaluates the starter: the runners are warm before anything is measured, as a served
runner is after its first evaluation), then R client threads at once, each stepping its env
--per-runner times with a `replace` of --source plus a unique comment — a kernel the compile
cache has never seen, so every measured evaluation compiles cold. Per build and R:

  - evaluations per wall-second of the batch, and per CPU-second: the CPU time (user + system)
    of the server and every process below it (runners, compilers, sandboxes, judges, references,
    executors, zygotes) over the batch, sampled from /proc every 50 ms (a process's last <50 ms
    are missed, alike for both builds);
  - the median latency of one step as the client sees it (a cold evaluation of a new kernel on a
    warm served runner).

    build/python-venv/bin/python bench/served_throughput.py --before OLD_BUILD --after build \\
        --task cpu/silu_mul --source tests/honest/silu_mul_avx2/kernel.cpp --per-runner 4
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from eval_throughput import TreeCpu  # noqa: E402

import kernelgym  # noqa: E402
from kernelgym import protocol  # noqa: E402


def serve(build, runners, directory):
    endpoint_file = directory / "endpoints.json"
    endpoint_file.unlink(missing_ok=True)
    env = dict(os.environ, KERNELGYM_TOOLS_DIR=str(Path(build).resolve() / "tpu_runner"))
    server = subprocess.Popen([str(Path(build) / "cli/kernelgym"), "serve", "--bind", "tcp://127.0.0.1:*",
                               "--runner-bind", "tcp://127.0.0.1:*", "--local-runners", str(runners),
                               "--endpoint-file", str(endpoint_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while not endpoint_file.exists():
        if server.poll() is not None:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return server, json.loads(endpoint_file.read_text())["clients"]


def batch(build, task, source, runners, per_runner, directory):
    server, address = serve(build, runners, directory)
    try:
        text = Path(source).read_text()
        clients = [kernelgym.Client(address, timeout_s=600) for _ in range(runners)]
        envs = []
        for c in clients:
            env = c.make(task, max_steps=per_runner + 5, time_budget_s=3600)["env"]
            envs.append(env)
        # The resets at once: every runner evaluates a starter (and starts what it keeps warm).
        warm = [threading.Thread(target=c.reset, args=(e,)) for c, e in zip(clients, envs)]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        time.sleep(1.0)  # what a runner starts after an evaluation (a spare, a zygote) is ready
        TREE.add(server.pid)
        TREE.sample()
        cpu0 = TREE.total_keep(server.pid)
        rows, lock = [], threading.Lock()

        def worker(client, env):
            for _ in range(per_runner):
                start = time.monotonic()
                reply = client.step(env, protocol.replace(text + f"\n// {uuid.uuid4().hex}\n"))
                seconds = time.monotonic() - start
                obs = reply.get("observation") or {}
                stages = (obs.get("report") or {}).get("stage_seconds") or {}
                with lock:
                    rows.append({"seconds": seconds, "status": obs.get("status"),
                                 "lock_wait": stages.get("timing_lock_wait", 0.0),
                                 "reference_start_cpu": stages.get("reference_start_cpu")})

        start = time.monotonic()
        threads = [threading.Thread(target=worker, args=(c, e)) for c, e in zip(clients, envs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        cpu = TREE.total(server.pid) - cpu0
        for c in clients:
            c.close()
    finally:
        server.terminate()
        server.wait()
    n = len(rows)
    ok = sum(1 for r in rows if r["status"] == "ok")
    starts = [r["reference_start_cpu"] for r in rows if r["reference_start_cpu"] is not None]
    return {"runners": runners, "evals": n, "ok": ok, "wall": wall, "cpu": cpu, "per_wall_s": n / wall,
            "per_cpu_s": n / cpu if cpu else 0, "latency_median": statistics.median(r["seconds"] for r in rows),
            "lock_wait_median": statistics.median(r["lock_wait"] for r in rows),
            "reference_start_cpu_median": statistics.median(starts) if starts else None,
            "statuses": sorted({str(r["status"]) for r in rows})}


class KeepingTreeCpu(TreeCpu):
    def total_keep(self, root):
        self.sample()
        with self.lock:
            return sum(v for (r, _), v in self.seen.items() if r == root)


TREE = None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the old build folder")
    ap.add_argument("--after", required=True, help="the new build folder")
    ap.add_argument("--task", default="cpu/silu_mul")
    ap.add_argument("--source", default="tests/honest/silu_mul_avx2/kernel.cpp")
    ap.add_argument("--runners", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--per-runner", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global TREE
    TREE = KeepingTreeCpu()
    rows = []
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        for i, r in enumerate(args.runners):
            order = [("before", args.before), ("after", args.after)]
            for name, build in (order if i % 2 == 0 else order[::-1]):
                row = batch(build, args.task, args.source, r, args.per_runner, Path(workdir))
                row["build"] = name
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load_start": load_start, "load_end": load, "rows": rows}))
        return
    print(f"task {args.task}, {args.per_runner} served evaluations of new kernels per runner, "
          f"load average {load_start:.1f} -> {load:.1f}\n")
    print("| build | runners | ok | evals / wall-s | evals / CPU-s | CPU-s / eval | step latency median s | "
          "timing-lock wait median s | reference start CPU-s median |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda r: (r["runners"], r["build"] != "before")):
        start = row["reference_start_cpu_median"]
        print(f"| {row['build']} | {row['runners']} | {row['ok']}/{row['evals']} | {row['per_wall_s']:.3f} | "
              f"{row['per_cpu_s']:.3f} | {row['cpu'] / row['evals']:.2f} | {row['latency_median']:.2f} | "
              f"{row['lock_wait_median']:.2f} | {'-' if start is None else f'{start:.3f}'} |")


if __name__ == "__main__":
    main()
