#!/usr/bin/env python3
"""Repeatability: one honest kernel evaluated again and again, quiet and beside CPU hogs, and the
spread of its measured speedup.

    python3 bench/repeatability.py [--repeats 20] [--hogs 1] [--task cpu/softmax_rows]
                                   [--kernel tests/honest/softmax_rows_avx2/kernel.cpp]
                                   [--kernelgym build/cli/kernelgym] [--json out.json]

A server with one local runner; each evaluation is a fork of one reset episode stepped with the
kernel plus a comment of its own (nothing answered from a cache), as a GRPO group's candidates
are. The quiet and loaded evaluations alternate — quiet, then the same beside --hogs busy-looping
processes started just before and stopped just after — so that whatever else the (shared) machine
does falls on both alike. Prints, for each condition, the speedup's mean, coefficient of variation
(stdev / mean), range, the interval's median relative half-width, the rounds discarded as
preempted, and how kernelgym.trust judged the evaluations (trusted / contended / noisy); and the host's load average
before and after (`uptime`). Needs the kernelgym Python package (`pip install ./python`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import kernelgym
from kernelgym import Client

from local_server import served

REPO = Path(__file__).resolve().parents[1]
HOG = "while True:\n    pass\n"


def evaluate(env: kernelgym.KernelGymEnv, kernel: str, tag: str) -> dict:
    scored = env.score([f"// repeatability {tag}\n{kernel}"], ties="none")[0]
    if scored.status != "ok":
        raise RuntimeError(f"the kernel was not ok ({scored.status}): {scored.text[:500]}")
    return {"speedup": scored.speedup, "trust": scored.trust}


def summary(rows: list[dict]) -> dict:
    speedups = [r["speedup"] for r in rows]
    mean = statistics.fmean(speedups)
    trust = [r["trust"] for r in rows]
    widths = [t["relative_half_width"] for t in trust if t["relative_half_width"] is not None]
    disturbed = [t["disturbed_fraction"] for t in trust if t["disturbed_fraction"] is not None]
    loads = [t["load_per_cpu"] for t in trust if t["load_per_cpu"] is not None]
    return {
        "n": len(speedups),
        "mean": mean,
        "cv": statistics.stdev(speedups) / mean if len(speedups) > 1 else 0.0,
        "min": min(speedups),
        "max": max(speedups),
        "median_relative_half_width": statistics.median(widths) if widths else None,
        "median_disturbed_fraction": statistics.median(disturbed) if disturbed else None,
        "median_load_per_cpu": statistics.median(loads) if loads else None,
        "levels": {level: sum(1 for t in trust if t["level"] == level) for level in ("trusted", "contended", "noisy")},
        "untrusted_reasons": sorted({reason.split(":")[0] for t in trust for reason in t["reasons"]}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=1, help="busy-looping processes beside the loaded evaluations")
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--kernel", default=str(REPO / "tests/honest/softmax_rows_avx2/kernel.cpp"))
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    parser.add_argument("--json", help="write every evaluation and the summaries here")
    args = parser.parse_args()
    kernel = Path(args.kernel).read_text()
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    quiet: list[dict] = []
    loaded: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, served(args.kernelgym, Path(tmp), 1) as address:
        with Client(address) as client, kernelgym.make(args.task, reward="log_speedup", client=client) as env:
            env.reset(seed=0)
            evaluate(env, kernel, "warm-up")  # compiler and harness caches, as in a run's steady state
            for i in range(args.repeats):
                quiet.append(evaluate(env, kernel, f"quiet {i}"))
                hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
                try:
                    loaded.append(evaluate(env, kernel, f"loaded {i}"))
                finally:
                    for hog in hogs:
                        hog.kill()
                        hog.wait()
                print(f"{i + 1}/{args.repeats}: quiet {quiet[-1]['speedup']:.3f}x, loaded {loaded[-1]['speedup']:.3f}x",
                      file=sys.stderr)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    result = {"task": args.task, "kernel": os.path.relpath(args.kernel, REPO), "hogs": args.hogs,
              "cpus": os.cpu_count(), "uptime_before": uptime_before, "uptime_after": uptime_after,
              "quiet": summary(quiet), "loaded": summary(loaded)}
    print(f"{args.task}, {result['kernel']}: {args.repeats} evaluations each, alternating; "
          f"loaded = beside {args.hogs} busy loop(s) on {os.cpu_count()} CPUs")
    print(f"before: {uptime_before}\nafter:  {uptime_after}")
    print(f"{'condition':10} {'mean':>7} {'CV':>7} {'min':>7} {'max':>7} {'CI half':>8} {'preempted':>9} "
          f"{'load/cpu':>8}  trust (trusted/contended/noisy)")
    for name in ("quiet", "loaded"):
        s = result[name]
        fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
        print(f"{name:10} {s['mean']:7.3f} {s['cv']:7.2%} {s['min']:7.3f} {s['max']:7.3f} "
              f"{fmt(s['median_relative_half_width'], '8.2%')} {fmt(s['median_disturbed_fraction'], '9.2%')} "
              f"{fmt(s['median_load_per_cpu'], '8.2f')}  {'/'.join(str(n) for n in s['levels'].values())}")
        if s["untrusted_reasons"]:
            print(f"{'':10} not trusted because: {'; '.join(s['untrusted_reasons'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "evaluations": {"quiet": quiet, "loaded": loaded}}, indent=1))


if __name__ == "__main__":
    main()
