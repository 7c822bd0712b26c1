#!/usr/bin/env python3
"""A cold `kernelgym eval` against a KernelBench-style harness, side by side (docs/benchmarks.md).

For each (task, kernel) and each repeat, in alternation (so that drift of the machine falls on
all sides alike):
  - `kernelgym eval --json` of each build in --builds: a new CLI process, and a kernel source the
    compile cache has never seen (the kernel plus a unique comment), so the compile is cold;
  - bench/kernelbench_style.py in a new Python process: torch imported, the kernel (plus the same
    kind of comment) built as a torch extension into a new build folder, 5 correctness trials,
    100 timed calls of each side.
Reports, per case and side, the median wall time of one evaluation (the whole process, as a user
waits for it), the median of each stage, the speedups each side measured, and the ratio of the
medians (KernelBench-style / kernelgym).

  build/python-venv/bin/python bench/kernelbench_compare.py --builds before=OLD_BUILD after=build \\
      --repeats 5 --case cpu/silu_mul=tests/honest/silu_mul_avx2/kernel.cpp \\
      --case cpu/softmax_rows=tests/honest/softmax_rows_avx2/kernel.cpp
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fresh_copy(source, workdir):
    """The kernel plus a unique comment: a source no cache has seen."""
    path = Path(workdir) / f"{uuid.uuid4().hex}.cpp"
    path.write_text(Path(source).read_text() + f"\n// {uuid.uuid4().hex}\n")
    return path


def run_kernelgym(build, task, source):
    env = dict(os.environ, KERNELGYM_TOOLS_DIR=str(Path(build).resolve() / "tpu_runner"))
    start = time.monotonic()
    out = subprocess.run([str(Path(build) / "cli/kernelgym"), "eval", "--task", task, "--source", str(source), "--json"],
                         capture_output=True, text=True, env=env)
    seconds = time.monotonic() - start
    try:
        r = json.loads(out.stdout)
    except json.JSONDecodeError:
        return {"status": "no-json", "seconds": seconds, "message": out.stderr[-300:]}
    timing = r.get("timing") or {}
    return {"status": r.get("status"), "seconds": seconds, "speedup": r.get("speedup"),
            "rounds": timing.get("rounds"), "converged": timing.get("converged"),
            "stages": r.get("stage_seconds") or {}, "message": r.get("message", "")}


def run_kernelbench(python, task, source, workdir):
    start = time.monotonic()
    out = subprocess.run([python, str(REPO / "bench/kernelbench_style.py"), "--task-dir",
                          str(REPO / "datasets/suites" / task), "--kernel", str(source), "--build-root", workdir],
                         capture_output=True, text=True)
    seconds = time.monotonic() - start
    try:
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"status": "no-json", "seconds": seconds, "message": out.stderr[-300:]}
    return {"status": r["status"], "seconds": seconds, "speedup": r.get("speedup"), "stages": r["stage_seconds"],
            "message": r.get("message", "")}


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rows):
    stages = sorted({k for r in rows for k in r.get("stages", {})})
    out = {"ok": sum(r["status"] == "ok" for r in rows), "n": len(rows),
           "wall_median_s": statistics.median(r["seconds"] for r in rows),
           "wall_all_s": [round(r["seconds"], 2) for r in rows],
           "speedup_median": median_or_none([r.get("speedup") for r in rows]),
           "stage_median_s": {k: round(median_or_none([r["stages"].get(k) for r in rows]) or 0, 4) for k in stages}}
    if "rounds" in rows[0]:
        out["rounds"] = [r.get("rounds") for r in rows]
        out["converged"] = sum(bool(r.get("converged")) for r in rows)
    bad = [f'{r["status"]}: {r["message"][:200]}' for r in rows if r["status"] != "ok"]
    if bad:
        out["not_ok"] = bad[:3]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--builds", nargs="+", default=["build"], help="NAME=BUILD_DIR (or BUILD_DIR) of each kernelgym build")
    p.add_argument("--python", default=str(REPO / "build/python-venv/bin/python"), help="a Python with torch")
    p.add_argument("--case", action="append", required=True, help="TASK=KERNEL_SOURCE")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", help="also write the raw rows here")
    a = p.parse_args()
    builds = dict(b.split("=", 1) if "=" in b else (b, b) for b in a.builds)
    print(f"load before: {os.getloadavg()}", flush=True)
    report = {}
    with tempfile.TemporaryDirectory() as workdir:
        for case in a.case:
            task, source = case.split("=", 1)
            rows = {name: [] for name in [*builds, "kernelbench-style"]}
            for i in range(a.repeats):
                for name, build in builds.items():
                    rows[name].append(run_kernelgym(build, task, fresh_copy(source, workdir)))
                    print(task, name, i, f'{rows[name][-1]["seconds"]:.2f} s', rows[name][-1]["status"], flush=True)
                rows["kernelbench-style"].append(run_kernelbench(a.python, task, fresh_copy(source, workdir), workdir))
                print(task, "kernelbench-style", i, f'{rows["kernelbench-style"][-1]["seconds"]:.2f} s',
                      rows["kernelbench-style"][-1]["status"], flush=True)
            summary = {name: summarize(r) for name, r in rows.items()}
            kb = summary["kernelbench-style"]["wall_median_s"]
            for name in builds:
                summary[name]["kernelbench_over_this"] = kb / summary[name]["wall_median_s"]
            report[task] = summary
            print(json.dumps({task: summary}, indent=1), flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
