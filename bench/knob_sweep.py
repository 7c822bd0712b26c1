#!/usr/bin/env python3
"""The full sweep of every knob template: each combination evaluated, the best ones timed again.

    python3 bench/knob_sweep.py [--suite all | --task ID ...] [--timing-budget-s 0.3] [--top 3]
                                [--final-budget 1.0] [--jobs 2] [--write]

The CI's knobs test checks a covering sample of each template's combinations; this checks them
all (every one must be correct: a failure is printed and makes the exit status 1) and finds the
fastest. Each combination goes through `kernelgym eval --knobs`, the same path as the
environment's `knobs` action, and is timed against the libtorch reference in one window. The
`--top` fastest are timed again with `--final-budget` so that the reported best is not a lucky
short run. With --write, the best combination and its speedup go to
datasets/suites/measured.json (`kernelgym tasks` and docs/tasks.md show them).
Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import subprocess
import sys
import time

import measured

REPO = measured.REPO


def combinations(knobs: dict) -> list[dict]:
    names = sorted(knobs)
    return [dict(zip(names, values)) for values in itertools.product(*(knobs[n]["values"] for n in names))]


def text(combo: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(combo.items()))


def evaluate(kernelgym: str, task_id: str, combo: dict, budget: float) -> dict:
    knobs = ",".join(f"{k}={v}" for k, v in sorted(combo.items()))
    run = subprocess.run([kernelgym, "eval", "--task", task_id, "--knobs", knobs, "--json", "--timing-budget-s", str(budget)],
                         capture_output=True, text=True)
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError:
        return {"status": "no_result", "message": run.stderr.strip()[:200]}


def sweep(kernelgym: str, task_id: str, knobs: dict, args) -> tuple[dict | None, list[str]]:
    combos = combinations(knobs)
    defaults = {name: spec["default"] for name, spec in knobs.items()}
    results, failures = [], []
    # Several evaluations at once: the runner's host-wide lock keeps their timing windows apart,
    # so one compiles and checks while another times.
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        evaluated = list(pool.map(lambda c: evaluate(kernelgym, task_id, c, args.budget), combos))
    for combo, r in zip(combos, evaluated):
        if r.get("status") != "ok" or not r.get("timing"):
            failures.append(f"{task_id} [{text(combo)}]: {r.get('status')}: {r.get('message')}")
            continue
        results.append((r["timing"]["speedup"], combo))
    if not results:
        return None, failures
    default_speedup = next((s for s, c in results if c == defaults), None)
    results.sort(key=lambda sc: -sc[0])
    finals = []
    for _, combo in results[:args.top]:
        r = evaluate(kernelgym, task_id, combo, args.final_budget)
        if r.get("status") == "ok" and r.get("timing"):
            finals.append((r["timing"]["speedup"], r["timing"]["speedup_ci95"], combo))
    if not finals:
        return None, failures + [f"{task_id}: the best combinations failed when timed again"]
    speedup, ci, combo = max(finals, key=lambda f: f[0])
    return {"best_knob_speedup": round(speedup, 4), "best_knob_ci95": [round(x, 4) for x in ci],
            "best_knobs": text(combo), "knob_combinations": len(combos),
            "knob_default_speedup": round(default_speedup, 4) if default_speedup else None}, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all")
    parser.add_argument("--task", action="append", help="only these tasks (repeatable)")
    parser.add_argument("--timing-budget-s", dest="budget", type=float, default=0.3, help="timing budget per combination, seconds")
    parser.add_argument("--top", type=int, default=3, help="how many of the fastest to time again")
    parser.add_argument("--final-budget", type=float, default=1.0, help="timing budget of the second timing")
    parser.add_argument("--jobs", type=int, default=2, help="evaluations at once (timing windows never overlap)")
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    parser.add_argument("--write", action="store_true", help="record the best in datasets/suites/measured.json")
    args = parser.parse_args()

    listing = subprocess.run([args.kernelgym, "tasks", "--suite", args.suite, "--json"], check=True,
                             capture_output=True, text=True)
    ids = [t["id"] for t in json.loads(listing.stdout) if t["knobs"] and (not args.task or t["id"] in args.task)]
    print("| task | combinations | correct | default | best | best combination | sweep time |")
    print("|---|---|---|---|---|---|---|")
    all_failures, best = [], {}
    for task_id in ids:
        suite, name = task_id.split("/", 1)
        knobs = json.loads((REPO / "datasets/suites" / suite / name / "task.json").read_text())["knobs"]
        start = time.monotonic()
        figures, failures = sweep(args.kernelgym, task_id, knobs, args)
        all_failures += failures
        n = len(combinations(knobs))
        if figures is None:
            print(f"| {task_id} | {n} | {n - len(failures)} | | | no correct combination | |", flush=True)
            continue
        best[task_id] = figures
        default = f"{figures['knob_default_speedup']:.3f}x" if figures["knob_default_speedup"] else "failed"
        low, high = figures["best_knob_ci95"]
        print(f"| {task_id} | {n} | {n - len(failures)} | {default} | {figures['best_knob_speedup']:.2f}x "
              f"({low:.2f}-{high:.2f}) | {figures['best_knobs']} | {time.monotonic() - start:.0f} s |", flush=True)
    for f in all_failures:
        print(f"FAILED {f}", file=sys.stderr)
    if args.write and best:
        measured.update(best, "python3 bench/knob_sweep.py " + " ".join(sys.argv[1:]))
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
