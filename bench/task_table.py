#!/usr/bin/env python3
"""The per-task table of docs/tasks.md: every task's reference time and its starter's speedup.

    python3 bench/task_table.py [--suite all] [--budget 1.0] [--kernelgym build/env/kernelgym]

Evaluates each task's starter with the real runner (`kernelgym eval --json`) and prints a
Markdown table: id, category, shapes, reference median, starter median, starter speedup with its
95% interval. The headroom of a task is how far a good kernel gets above the starter; the
starter is naive on purpose, so its speedup is expected to be below 1. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all")
    parser.add_argument("--budget", type=float, default=1.0, help="timing budget per task, seconds")
    parser.add_argument("--kernelgym", default=str(REPO / "build/env/kernelgym"))
    args = parser.parse_args()

    listing = subprocess.run([args.kernelgym, "tasks", "--suite", args.suite, "--json"], check=True,
                             capture_output=True, text=True)
    tasks = json.loads(listing.stdout)
    print("| task | category | sizes | reference median | starter median | starter speedup (95% CI) |")
    print("|---|---|---|---|---|---|")
    failures = 0
    for task in tasks:
        suite, name = task["id"].split("/", 1)
        starter = REPO / "datasets/suites" / suite / name / "starter.cpp"
        spec = json.loads((starter.parent / "task.json").read_text())
        sizes = ", ".join(f"{s['name']}={s['value']}" for s in spec.get("sizes", []))
        run = subprocess.run([args.kernelgym, "eval", "--task", task["id"], "--source", str(starter), "--json",
                              "--budget", str(args.budget)], capture_output=True, text=True)
        try:
            result = json.loads(run.stdout)
        except json.JSONDecodeError:
            print(f"| {task['id']} | {task['category']} | {sizes} | evaluation failed: {run.stderr.strip()[:80]} | | |")
            failures += 1
            continue
        timing = result.get("timing") or {}
        if result.get("status") != "ok" or not timing:
            print(f"| {task['id']} | {task['category']} | {sizes} | {result.get('status')}: {result.get('message')} | | |")
            failures += 1
            continue
        ref_ms = timing["reference"]["median_ns"] / 1e6
        cand_ms = timing["candidate"]["median_ns"] / 1e6
        low, high = timing["speedup_ci95"]
        print(f"| {task['id']} | {task['category']} | {sizes} | {ref_ms:.2f} ms | {cand_ms:.2f} ms | "
              f"{timing['speedup']:.3f}x ({low:.3f}-{high:.3f}) |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
