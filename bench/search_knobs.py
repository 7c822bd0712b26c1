#!/usr/bin/env python3
"""`kernelgym search --proposer knobs` on every templated task: how much faster than the starter
a small search gets, and how many evaluations it takes.

    python3 bench/search_knobs.py [--max-evaluations 12] [--algorithm beam] [--suite all] [--out DIR]

Starts one `kernelgym serve` (one local runner), runs one search per templated task against it
(each saves its graph and Markdown report under --out), and prints a Markdown table: the
starter's and the best kernel's speedup over the reference, best / starter, the final (submit)
evaluation of the best, the evaluation at which the best was found, and the wall time. The
figures in docs/search.md come from this script. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from local_server import served

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-evaluations", dest="budget", type=int, default=12, help="evaluations per search")
    parser.add_argument("--algorithm", default="beam", choices=["beam", "parallel", "ucb"])
    parser.add_argument("--suite", default="all")
    parser.add_argument("--out", default="", help="keep the graphs and reports here")
    parser.add_argument("--bin", default=os.environ.get("KERNELGYM_BIN", str(REPO / "build" / "cli" / "kernelgym")))
    args = parser.parse_args()

    tasks = json.loads(subprocess.run([args.bin, "tasks", "--suite", args.suite, "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    templated = [t["id"] for t in tasks if t.get("knobs")]
    out = Path(args.out or tempfile.mkdtemp(prefix="kg-search-"))
    out.mkdir(parents=True, exist_ok=True)
    with served(args.bin, out) as endpoint:
        print(f"{len(templated)} templated tasks, {args.algorithm}, {args.budget} evaluations each\n")
        print("| task | starter | best | best / starter | final (submit) | found at | seconds |")
        print("|---|---|---|---|---|---|---|")
        ratios = []
        for task in templated:
            name = task.replace("/", "_")
            graph_file = out / f"{name}.json"
            graph_file.unlink(missing_ok=True)
            start = time.monotonic()
            run = subprocess.run([args.bin, "search", "--task", task, "--proposer", "knobs", "--algorithm",
                                  args.algorithm, "--max-evaluations", str(args.budget), "--connect", endpoint,
                                  "--graph", str(graph_file), "--report", str(out / f"{name}.md")],
                                 capture_output=True, text=True)
            seconds = time.monotonic() - start
            if not graph_file.exists():
                print(f"| {task} | search failed: {run.stderr.strip().splitlines()[-1:]} | | | | | |")
                continue
            graph = json.loads(graph_file.read_text())
            nodes = graph["nodes"]
            starter = nodes[0]["speedup"] if nodes[0]["status"] == "ok" else 0.0
            ok = [n for n in nodes if n["status"] == "ok"]
            best = max(ok, key=lambda n: n["speedup"]) if ok else None
            final = graph.get("final_evaluation") or {}
            ratio = best["speedup"] / starter if best and starter > 0 else float("nan")
            ratios.append(ratio)
            print(f"| {task} | {starter:.2f}x | {best['speedup'] if best else 0:.2f}x | **{ratio:.2f}x** | "
                  f"{final.get('status', '-')} {final.get('speedup', 0):.2f}x | {best['id'] if best else '-'} | "
                  f"{seconds:.0f} |")
        at_least = sum(1 for r in ratios if r >= 1.5)
        print(f"\n{at_least} of {len(ratios)} tasks at least 1.5x faster than their starter; "
              f"graphs and reports in {out}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
