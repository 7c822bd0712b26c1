#!/usr/bin/env python3
"""The per-task table of docs/tasks.md: every task's reference time, its starter's speedup, and
for templated tasks the best knob combination's speedup.

    python3 bench/task_table.py [--suite all] [--timing-budget-s 1.0] [--jobs 2] [--write]   # measure the starters
    python3 bench/task_table.py --recorded [--suite all]                 # the table from measured.json

Evaluates each task's starter with the real runner (`kernelgym eval --json`): the reference's
median time, the starter's, and the speedup with its 95% interval, from one timing window. The
starter is naive on purpose, so its speedup is expected below 1; the headroom of a task is how
far a good kernel gets above it — the best-knob column comes from bench/knob_sweep.py. With
--write the figures go to datasets/suites/measured.json, which `kernelgym tasks` shows.
Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys

import measured

REPO = measured.REPO


def measure_starter(kernelgym: str, task_id: str, budget: float) -> dict | str:
    """The starter's figures, or why there are none."""
    suite, name = task_id.split("/", 1)
    starter = REPO / "datasets/suites" / suite / name / "starter.cpp"
    run = subprocess.run([kernelgym, "eval", "--task", task_id, "--source", str(starter), "--json",
                          "--timing-budget-s", str(budget)], capture_output=True, text=True)
    try:
        result = json.loads(run.stdout)
    except json.JSONDecodeError:
        return f"evaluation failed: {run.stderr.strip()[:80]}"
    timing = result.get("timing") or {}
    if result.get("status") != "ok" or not timing:
        return f"{result.get('status')}: {result.get('message')}"
    return {"reference_ms": round(timing["reference"]["median_ns"] / 1e6, 4),
            "starter_ms": round(timing["candidate"]["median_ns"] / 1e6, 4),
            "starter_speedup": round(timing["speedup"], 4),
            "starter_ci95": [round(x, 4) for x in timing["speedup_ci95"]]}


def row(task: dict, figures: dict | str | None) -> str:
    suite, name = task["id"].split("/", 1)
    spec = json.loads((REPO / "datasets/suites" / suite / name / "task.json").read_text())
    sizes = ", ".join(f"{s['name']}={s['value']}" for s in spec["sizes"])  # in the kernel's order
    head = f"| {task['id']} | {task['category']} | {sizes} |"
    if not isinstance(figures, dict) or "starter_speedup" not in figures:
        return f"{head} {figures or 'not measured'} | | | |"
    low, high = figures.get("starter_ci95", [figures["starter_speedup"]] * 2)
    best = ""
    if "best_knob_speedup" in figures:
        best = f"{figures['best_knob_speedup']:.2f}x ({figures['best_knobs']}; {figures['knob_combinations']} swept)"
    elif task["knobs"]:
        best = "not swept"
    return (f"{head} {figures['reference_ms']:.2f} ms | {figures['starter_ms']:.2f} ms | "
            f"{figures['starter_speedup']:.3f}x ({low:.3f}-{high:.3f}) | {best} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all")
    parser.add_argument("--task", action="append", help="only these tasks (repeatable)")
    parser.add_argument("--timing-budget-s", dest="budget", type=float, default=1.0, help="timing budget per task, seconds")
    parser.add_argument("--jobs", type=int, default=2, help="evaluations at once (timing windows never overlap)")
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    parser.add_argument("--recorded", action="store_true", help="print measured.json's figures, measure nothing")
    parser.add_argument("--write", action="store_true", help="record the figures in datasets/suites/measured.json")
    args = parser.parse_args()

    listing = subprocess.run([args.kernelgym, "tasks", "--suite", args.suite, "--json"], check=True,
                             capture_output=True, text=True)
    tasks = [t for t in json.loads(listing.stdout) if not args.task or t["id"] in args.task]
    recorded = measured.load()["tasks"]
    print("| task | category | sizes | reference median | starter median | starter speedup (95% CI) "
          "| best knob combination |")
    print("|---|---|---|---|---|---|---|")
    failures, fresh = 0, {}
    measured_now = {}
    if not args.recorded:  # several at once: the runner's host-wide lock keeps timing windows apart
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            measured_now = dict(zip([t["id"] for t in tasks],
                                    pool.map(lambda t: measure_starter(args.kernelgym, t["id"], args.budget), tasks)))
    for task in tasks:
        if args.recorded:
            figures = recorded.get(task["id"])
        else:
            figures = measured_now[task["id"]]
            if isinstance(figures, dict):
                fresh[task["id"]] = figures
                figures = {**recorded.get(task["id"], {}), **figures}
            else:
                failures += 1
        print(row(task, figures), flush=True)
    if args.write and fresh:
        measured.update(fresh, f"python3 bench/task_table.py --timing-budget-s {args.budget} --write")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
