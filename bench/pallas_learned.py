#!/usr/bin/env python3
"""PPO and the cost model on the Pallas knob templates, judged on held-out tasks: the speedup of
the trained policy's *first* setting (greedy) against the best known one, per task, in-sample and
held out (issue [tpu-tune]: ">= 80% of the best known on held-out tasks").

    kernelgym train sweep --backend pallas --task T1 --task T2 ... --measurements sweep.jsonl
    KERNELGYM_BIN=build/cli/kernelgym python3 bench/pallas_learned.py --sweep sweep.jsonl \
        --train T1 --train T2 --holdout H1 --holdout H2 [--seeds 1 2 3] [--out DIR]
    ... or --leave-one-out T1 --leave-one-out T2 ...: one fold per task, trained on the others

`--sweep` is a measurement file holding every setting of every task named (`train sweep`): each
setting was compiled, checked and paid its estimate once, through a served pallas runner; the
fastest is the best known. Every run below starts from a copy of it, so PPO's episodes, the
held-out evaluation and the cost model's ranking re-use those evaluations (the script reports how
many new ones each run made: 0 when the sweep is complete). Each run starts its own `kernelgym
serve` (`train` does). Two variants: the default inputs, and `--no-knob-names` (no knob names or
string values: only a value's position, domain size, default-ness and magnitude). Standard
library only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kernelgym() -> str:
    return os.environ.get("KERNELGYM_BIN", str(REPO / "build" / "cli" / "kernelgym"))


def run(args: list[str]) -> None:
    done = subprocess.run([kernelgym(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"kernelgym {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def flags(tasks: list[str], name: str) -> list[str]:
    return [x for t in tasks for x in (name, t)]


def one_run(a: argparse.Namespace, variant: str, seed: int, train: list[str], holdout: list[str], name: str) -> dict:
    out = Path(a.out) / f"{variant}-seed{seed}" / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    store = out / "measurements.jsonl"
    shutil.copyfile(a.sweep, store)
    before = lines(store)
    extra = ["--no-knob-names"] if variant == "no-names" else []
    common = ["--backend", "pallas", "--seed", str(seed), "--measurements", str(store)]
    run(["train", "ppo", *common, *flags(train, "--task"), *flags(holdout, "--holdout"), *extra,
         "--iterations", str(a.iterations), "--episodes", str(a.episodes), "--steps", str(a.steps), "--lr", str(a.lr),
         "--k", str(a.k), "--eval-seeds", "8", "--checkpoint-every", "0", "--out", str(out / "ppo")])
    run(["train", "eval", *common, "--policy", str(out / "ppo" / "policy.pt"), *flags(train, "--task"),
         "--k", str(a.k), "--eval-seeds", "8", "--out", str(out / "insample")])
    run(["train", "cost-model", *common, *flags(train, "--task"), *flags(holdout, "--holdout"), *extra,
         "--data", str(store), "--epochs", "300", "--out", str(out / "cost")])
    read = lambda p: json.loads(p.read_text())
    return {"heldout": read(out / "ppo" / "heldout.json")["tasks"],
            "insample": read(out / "insample" / "heldout.json")["tasks"],
            "cost": read(out / "cost" / "cost_model.json")["holdout"],
            "new_evaluations": lines(store) - before}


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs)) if xs else 0.0


def fraction(row: dict) -> float:
    return row["greedy_first"] / row["best_known"] if row["best_known"] > 0 else 0.0


def pct(x: float) -> str:
    return f"{x:.0%}"


def report(a: argparse.Namespace, variant: str, folds: list[tuple[list[str], list[str]]]) -> list[str]:
    """Per task: its held-out figure (from the fold that held it out) and its in-sample figure
    (geomean over the folds that trained on it), per seed."""
    held: dict[str, dict] = {}
    insample: dict[str, dict[int, list[float]]] = {}
    cost: dict[str, dict] = {}
    new_evaluations = 0
    for i, (train, holdout) in enumerate(folds):
        for seed in a.seeds:
            r = one_run(a, variant, seed, train, holdout, f"fold{i}")
            new_evaluations += r["new_evaluations"]
            for row in r["heldout"]:
                held.setdefault(row["task"], {"row": row, "first": {}})["first"][seed] = row["greedy_first"]
            for row in r["insample"]:
                insample.setdefault(row["task"], {}).setdefault(seed, []).append(fraction(row))
            if seed == a.seeds[0]:
                for c in r["cost"]:
                    cost[c["task"]] = c
    seeds = " / ".join(str(s) for s in a.seeds)
    rows = [f"### inputs: {'default' if variant == 'names' else '--no-knob-names'}", "",
            f"| held-out task | starter | random 1 | best known | PPO 1, seeds {seeds} | PPO 1 / best known "
            f"| in-sample: PPO 1 / best known (when trained on) | cost model: top-ranked / best, Spearman |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    held_fractions: dict[int, list[float]] = {s: [] for s in a.seeds}
    in_fractions: dict[int, list[float]] = {s: [] for s in a.seeds}
    for task, h in held.items():
        row, best = h["row"], h["row"]["best_known"]
        firsts = [h["first"][s] for s in a.seeds]
        for s, f in zip(a.seeds, firsts):
            held_fractions[s].append(f / best if best > 0 else 0.0)
        ins = [geomean(insample.get(task, {}).get(s, [])) for s in a.seeds]
        for s, f in zip(a.seeds, ins):
            if insample.get(task, {}).get(s):
                in_fractions[s].append(f)
        c = cost.get(task)
        rows.append(f"| {task} | {row['starter']:.3f} | {row['random_first']:.3f} | {best:.3f} | "
                    + " / ".join(f"{f:.3f}" for f in firsts) + " | "
                    + " / ".join(pct(f / best if best > 0 else 0.0) for f in firsts) + " | "
                    + (" / ".join(pct(f) for f in ins) if task in insample else "-") + " | "
                    + (f"{pct(c['top1_fraction_of_best'])}, {c['spearman']:.2f}" if c else "-") + " |")
    for task, by_seed in insample.items():  # tasks never held out (a --train/--holdout split)
        if task in held:
            continue
        for s in a.seeds:
            in_fractions[s].append(geomean(by_seed.get(s, [])))
        rows.append(f"| {task} (trained on, never held out) | | | | | - | "
                    + " / ".join(pct(geomean(by_seed.get(s, []))) for s in a.seeds) + " | - |")
    # Means, not geometric means: a failed first setting is 0% of the best.
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0
    reached = lambda xs: f"{sum(x >= 0.8 for x in xs)}/{len(xs)}"
    rows.append("| **mean (tasks at >= 80%)** | | | | | **" +
                " / ".join(f"{pct(mean(held_fractions[s]))} ({reached(held_fractions[s])})" for s in a.seeds) + "** | "
                + " / ".join(f"{pct(mean(in_fractions[s]))} ({reached(in_fractions[s])})" for s in a.seeds) + " | |")
    rows += ["", f"New evaluations over all runs (0: the sweep answered everything): {new_evaluations}.", ""]
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", required=True, type=Path)
    p.add_argument("--train", action="append", default=[], help="a training task (with --holdout)")
    p.add_argument("--holdout", action="append", default=[], help="a held-out task (with --train)")
    p.add_argument("--leave-one-out", action="append", default=[], metavar="TASK",
                   help="instead: one fold per task named, trained on the others and holding it out")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--variants", nargs="+", default=["names", "no-names"], choices=["names", "no-names"])
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", default="pallas-learned")
    a = p.parse_args()
    if a.leave_one_out:
        folds = [([t for t in a.leave_one_out if t != h], [h]) for h in a.leave_one_out]
    elif a.train and a.holdout:
        folds = [(a.train, a.holdout)]
    else:
        p.error("name --train and --holdout tasks, or --leave-one-out tasks")
    text = "\n".join(line for variant in a.variants for line in report(a, variant, folds))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
