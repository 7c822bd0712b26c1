#!/usr/bin/env python3
"""Served pallas evaluations, cold and warm, and a JAXBench directory task's evaluation (issues #35, #30).

    python3 bench/pallas_served.py [--after build] [--before OLD_BUILD] [--steps 5] [--rounds 1]
        [--jaxbench-dir JAXBENCH/benchmark] [--jaxbench-case 8p_GEMM]
    python3 bench/pallas_served.py --repeats 4 [--rounds 2]

Each build in turn (before and after alternate, `--rounds` times), every run with a fresh cache
folder (KERNELGYM_CACHE), so that nothing of an earlier run is found:

* served: `kernelgym serve` with one local pallas runner, an env on jaxbench-p/gemm; the reset
  evaluates the starter cold (the fork servers start, the reference's full-size estimate is
  computed), then `--steps` candidates (the starter under a new first line each: new to the
  episode's cache, but since the candidate compile cache, the same program to the runner, whose
  compile it reuses) are evaluated warm. A second server on the same cache folder
  then evaluates the starter once more: a runner's first evaluation of a task whose reference
  estimate another runner of the host already computed.
* with `--jaxbench-dir`: the JAXBench case (default 8p_GEMM) evaluated twice by `kernelgym eval`
  (each a process of its own, one cache folder), then served: a reset and `--steps` steps. The
  candidate is jaxbench-p/gemm's starter with 128-wide blocks (which divide the case's scaled
  check sizes).

With `--repeats N` only this: one build, a served episode whose reset evaluates gemm's starter and
whose N steps resubmit the same program (under a new first comment line: not part of the
program's key), with the candidate compile cache on and off (KERNELGYM_PALLAS_COMPILE_CACHE=0),
alternating, `--rounds` times.

Prints wall seconds per evaluation and the load average; the evaluations' own stage times come
from `kernelgym eval --json`. Standard library and the kernelgym Python package (scripts/python_venv.sh).
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
GEMM = "jaxbench-p/gemm"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def gemm_starter() -> str:
    return (REPO / "datasets/suites/jaxbench-p/gemm/pallas/starter.py").read_text()


class Server:
    def __init__(self, kernelgym: Path, cache: Path, extra: list[str], env: dict | None = None):
        sys.path.insert(0, str(REPO / "python"))
        import kernelgym as kg
        self.kg = kg
        self.tmp = tempfile.TemporaryDirectory()
        endpoint_file = Path(self.tmp.name) / "endpoints.json"
        self.process = subprocess.Popen(
            [str(kernelgym), *extra, "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind", "tcp://127.0.0.1:*",
             "--local-runners", "1", "--local-runner-backends", "pallas", "--endpoint-file", str(endpoint_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, KERNELGYM_CACHE=str(cache), **(env or {})))
        while not endpoint_file.exists():
            if self.process.poll() is not None:
                raise SystemExit("kernelgym serve exited")
            time.sleep(0.1)
        self.client = kg.Client(json.loads(endpoint_file.read_text())["clients"], timeout_s=900)

    def episode(self, task: str, source: str, steps: int) -> tuple[float, list[float]]:
        """The reset's wall seconds (the task's starter, or `source` as the first step when the task
        has none) and each step's, every step a new program."""
        env = self.client.make(task, backend="pallas", max_steps=steps + 2)["env"]
        start = time.perf_counter()
        self.client.reset(env, seed=1)
        first = time.perf_counter() - start
        walls = []
        for i in range(steps):
            start = time.perf_counter()
            step = self.client.step(env, self.kg.protocol.replace(f"# candidate {i} {time.time_ns()}\n{source}"))
            walls.append(time.perf_counter() - start)
            if step["observation"]["status"] != "ok":
                raise SystemExit(f"{task} step {i}: {step['observation']['text'][:2000]}")
        self.client.close_env(env)
        return first, walls

    def close(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=120)
        self.tmp.cleanup()


def served_gemm(kernelgym: Path, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        server = Server(kernelgym, Path(cache), [])
        try:
            first, walls = server.episode(GEMM, gemm_starter(), steps)
        finally:
            server.close()
        again = Server(kernelgym, Path(cache), [])  # another runner, the same host cache
        try:
            second_runner_first, _ = again.episode(GEMM, gemm_starter(), 0)
        finally:
            again.close()
    return {"cold_first": first, "warm": walls, "second_runner_first": second_runner_first}


def served_repeats(kernelgym: Path, steps: int, compile_cache: bool) -> dict:
    """The starter's reset, then `steps` resubmissions of the same program (the starter under a new
    first comment line, so the episode's own cache does not answer: the runner evaluates each),
    with the candidate compile cache on or off (KERNELGYM_PALLAS_COMPILE_CACHE=0)."""
    with tempfile.TemporaryDirectory() as cache:
        server = Server(kernelgym, Path(cache), [], {} if compile_cache else {"KERNELGYM_PALLAS_COMPILE_CACHE": "0"})
        try:
            first, walls = server.episode(GEMM, gemm_starter(), steps)
        finally:
            server.close()
    return {"cold_first": first, "repeats": walls}


def jaxbench(kernelgym: Path, jaxbench_dir: Path, case: str, steps: int) -> dict:
    source = gemm_starter().replace(", 256)", ", 128)")
    task = f"jaxbench-ext/{case}"
    out = {"cli": [], "cli_stages": []}
    with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile("w", suffix=".py") as file:
        file.write(source)
        file.flush()
        for _ in range(2):
            start = time.perf_counter()
            run = subprocess.run([str(kernelgym), "--jaxbench-dir", str(jaxbench_dir), "eval", "--task", task,
                                  "--backend", "pallas", "--source", file.name, "--json"],
                                 capture_output=True, text=True, env=dict(os.environ, KERNELGYM_CACHE=cache))
            out["cli"].append(time.perf_counter() - start)
            result = json.loads(run.stdout)
            if result["status"] != "ok":
                raise SystemExit(f"{task}: {result['status']}: {result['message']}")
            out["cli_stages"].append({k: round(v, 2) for k, v in result["stage_seconds"].items() if v >= 0.05})
    with tempfile.TemporaryDirectory() as cache:
        server = Server(kernelgym, Path(cache), ["--jaxbench-dir", str(jaxbench_dir)])
        try:
            env = server.client.make(task, backend="pallas", max_steps=steps + 2)["env"]
            server.client.reset(env, seed=1)  # a case without a starter: the reset evaluates a stub
            walls = []
            for i in range(steps + 1):
                start = time.perf_counter()
                step = server.client.step(env, server.kg.protocol.replace(f"# candidate {i} {time.time_ns()}\n{source}"))
                walls.append(time.perf_counter() - start)
                if step["observation"]["status"] != "ok":
                    raise SystemExit(f"{task} step {i}: {step['observation']['text'][:2000]}")
            server.client.close_env(env)
        finally:
            server.close()
    out["served_first"], out["served_warm"] = walls[0], walls[1:]
    return out


def fmt(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=Path, default=REPO / "build", help="the build folder to measure")
    parser.add_argument("--before", type=Path, help="a build folder to measure side by side (alternating)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jaxbench-dir", type=Path, help="a JAXBench checkout's benchmark/ folder")
    parser.add_argument("--jaxbench-case", default="8p_GEMM")
    parser.add_argument("--skip-gemm", action="store_true", help="only the JAXBench case")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--repeats", type=int, default=0,
                        help="only this: served resubmissions of gemm's starter, compile cache on and off, alternating")
    args = parser.parse_args()
    if args.repeats:
        return repeats_main(args)
    builds = {"after": args.after} | ({"before": args.before} if args.before else {})
    figures: dict = {name: {"gemm": [], "jaxbench": []} for name in builds}
    for round_ in range(args.rounds):
        for name, build in builds.items():
            kernelgym = build / "cli/kernelgym"
            if not args.skip_gemm:
                before_load = load()
                measured = served_gemm(kernelgym, args.steps)
                measured["load"] = f"{before_load} -> {load()}"
                figures[name]["gemm"].append(measured)
                print(f"[round {round_}] {name} served {GEMM}: cold first {measured['cold_first']:.2f} s, warm "
                      f"{fmt(measured['warm'])}, a second runner's first {measured['second_runner_first']:.2f} s; "
                      f"load {measured['load']}", flush=True)
            if args.jaxbench_dir:
                before_load = load()
                measured = jaxbench(kernelgym, args.jaxbench_dir, args.jaxbench_case, args.steps)
                measured["load"] = f"{before_load} -> {load()}"
                figures[name]["jaxbench"].append(measured)
                print(f"[round {round_}] {name} {args.jaxbench_case}: kernelgym eval {measured['cli'][0]:.2f} s then "
                      f"{measured['cli'][1]:.2f} s (stages {measured['cli_stages'][1]}); served first "
                      f"{measured['served_first']:.2f} s, then {fmt(measured['served_warm'])}; load {measured['load']}",
                      flush=True)
    print(f"\n# {os.cpu_count()} vCPU; wall seconds; medians over {args.rounds} round(s)")
    for name in builds:
        gemm = figures[name]["gemm"]
        if gemm:
            print(f"| {name} | served {GEMM} cold first {fmt([g['cold_first'] for g in gemm])} | warm "
                  f"{fmt([w for g in gemm for w in g['warm']])} | second runner's first "
                  f"{fmt([g['second_runner_first'] for g in gemm])} |")
        jb = figures[name]["jaxbench"]
        if jb:
            print(f"| {name} | {args.jaxbench_case} kernelgym eval first {fmt([j['cli'][0] for j in jb])}, second "
                  f"{fmt([j['cli'][1] for j in jb])} | served {fmt([w for j in jb for w in j['served_warm']])} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


def repeats_main(args) -> int:
    kernelgym = args.after / "cli/kernelgym"
    figures: dict = {"cache on": [], "cache off": []}
    for round_ in range(args.rounds):
        for name in ("cache off", "cache on") if round_ % 2 else ("cache on", "cache off"):
            before_load = load()
            measured = served_repeats(kernelgym, args.repeats, name == "cache on")
            measured["load"] = f"{before_load} -> {load()}"
            figures[name].append(measured)
            print(f"[round {round_}] {name}: cold first {measured['cold_first']:.2f} s, repeats "
                  f"{fmt(measured['repeats'])}; load {measured['load']}", flush=True)
    print(f"\n# {os.cpu_count()} vCPU; wall seconds of served evaluations of {GEMM}'s starter resubmitted")
    for name, runs in figures.items():
        print(f"| {name} | cold first {fmt([r['cold_first'] for r in runs])} | repeats "
              f"{fmt([w for r in runs for w in r['repeats']])} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
