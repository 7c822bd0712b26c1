#!/usr/bin/env python3
"""How many real evaluations `kernelgym search --proposer knobs` needs to reach 95% of the best
known speedup on a task, with and without a cost model (`--cost-model`).

    python3 bench/cost_model_search.py --cost-model cost_model.pt --sweep heldout-sweep.jsonl \
        --task cpu/silu_mul --task ... [--max-evaluations 16] [--seeds 3]

`--sweep` is a measurement file from `kernelgym train sweep` holding every setting of each task:
its fastest setting is the best known speedup, and each setting's speedup there is the number a
search's evaluation of that setting is judged by. Judging by the sweep rather than by the
search's own re-measurement keeps timing noise from deciding whether "95%" was reached (a setting
within a few percent of the best can measure above or below the line from run to run); the
search's own figure is printed too. Starts one `kernelgym serve` and runs every search against
it. Standard library only.
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

from local_server import served

REPO = Path(__file__).resolve().parents[1]


def knob_text(value) -> str:
    return str(value)


def key_of(knobs: dict) -> str:
    return ",".join(f"{name}={knob_text(knobs[name])}" for name in sorted(knobs))


def load_sweep(path: Path) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("action_kind") != "knobs":
            continue
        values = json.loads(row["action"])["values"]
        speedup = row["speedup"] if row["status"] == "ok" else 0.0
        table.setdefault(row["task"], {})[key_of(values)] = speedup
    return table


def evaluations_to_reach(graph: dict, speedups: dict[str, float], target: float) -> tuple[int | None, int | None]:
    """(by the sweep's numbers, by the search's own) the 1-based evaluation reaching `target`."""
    by_sweep = by_own = None
    nodes = sorted((n for n in graph["nodes"] if n["id"] > 0), key=lambda n: n["id"])
    for i, node in enumerate(nodes, start=1):
        if not node.get("knobs"):
            continue
        if by_sweep is None and speedups.get(key_of(node["knobs"]), 0.0) >= target:
            by_sweep = i
        if by_own is None and node["status"] == "ok" and node["speedup"] >= target:
            by_own = i
    return by_sweep, by_own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost-model", required=True)
    parser.add_argument("--sweep", required=True, type=Path)
    parser.add_argument("--task", action="append", required=True)
    parser.add_argument("--max-evaluations", dest="budget", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--bin", default=os.environ.get("KERNELGYM_BIN", str(REPO / "build" / "cli" / "kernelgym")))
    args = parser.parse_args()

    table = load_sweep(args.sweep)
    out = Path(args.out or tempfile.mkdtemp(prefix="kg-costmodel-"))
    out.mkdir(parents=True, exist_ok=True)
    with served(args.bin, out) as endpoint:
        print(f"budget {args.budget} evaluations; beam search with the knobs proposer; {args.seeds} seeds without "
              f"the model (its ranking is deterministic: one run with it); '>{args.budget}' = not reached\n")
        print("| task | settings | best known | without model: evaluations to 95% (per seed) | mean | "
              "with model | by the search's own numbers (without / with) |")
        print("|---|---|---|---|---|---|---|")
        totals = {"without": [], "with": []}
        for task in args.task:
            speedups = table.get(task)
            if not speedups:
                print(f"| {task} | not in the sweep | | | | | |")
                continue
            best = max(speedups.values())
            target = 0.95 * best
            runs = {}
            for variant, seeds in (("without", range(1, args.seeds + 1)), ("with", [1])):
                for seed in seeds:
                    graph_file = out / f"{task.replace('/', '_')}-{variant}-{seed}.json"
                    graph_file.unlink(missing_ok=True)
                    cmd = [args.bin, "search", "--task", task, "--proposer", "knobs", "--algorithm", "beam",
                           "--max-evaluations", str(args.budget), "--seed", str(seed), "--no-submit",
                           "--connect", endpoint, "--graph", str(graph_file)]
                    if variant == "with":
                        cmd += ["--cost-model", args.cost_model]
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    if not graph_file.exists():
                        print(f"search failed: {run.stderr.strip()[-400:]}", file=sys.stderr)
                        return 1
                    runs.setdefault(variant, []).append(
                        evaluations_to_reach(json.loads(graph_file.read_text()), speedups, target))
            cap = args.budget + 1  # "not reached" counts as budget + 1 in the means
            without = [r[0] or cap for r in runs["without"]]
            with_model = runs["with"][0][0] or cap
            totals["without"].append(statistics.mean(without))
            totals["with"].append(with_model)
            fmt = lambda n: str(n) if n <= args.budget else f">{args.budget}"
            own = (", ".join(fmt(r[1] or cap) for r in runs["without"]) + " / " + fmt(runs["with"][0][1] or cap))
            print(f"| {task} | {len(speedups)} | {best:.3f}x | {', '.join(fmt(n) for n in without)} | "
                  f"{statistics.mean(without):.1f} | **{fmt(with_model)}** | {own} |")
        if totals["with"]:
            print(f"\nmean over tasks: without {statistics.mean(totals['without']):.1f}, "
                  f"with {statistics.mean(totals['with']):.1f} evaluations; graphs in {out}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
