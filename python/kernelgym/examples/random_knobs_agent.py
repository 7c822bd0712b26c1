"""Random search over a task's knobs: the smallest complete policy.

Each step picks a value for every knob of the task (task.json's ``knobs``) at random and sends a
``knobs`` action; the server writes the kernel from the task's template, evaluates it and answers
with the speedup. At the end it prints the best setting found.

    build/cli/kernelgym serve &                   # clients on tcp://127.0.0.1:5555, one cpu runner
    python -m kernelgym.examples.random_knobs_agent --task cpu/softmax_rows --steps 8 --seed 0

Exit status: 0 done (whether or not a setting beat the starter), 2 the task has no knobs.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from kernelgym.client import Client


def describe(values: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in sorted(values.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", "--address", dest="address", default="tcp://127.0.0.1:5555", help="the server's client endpoint")
    parser.add_argument("--task", default="cpu/softmax_rows", help="a task with knobs")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--steps", type=int, default=8, help="knob settings to try (the episode's max_steps)")
    parser.add_argument("--seed", type=int, default=None, help="seeds both the choice of settings and the episode")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")

    rng = random.Random(args.seed)
    best: tuple[float, int, dict[str, Any]] | None = None  # speedup, step, values
    with Client(args.address) as client:
        task = client.get_task(args.task)
        knobs = task.get("knobs") or {}
        if not knobs:
            print(f"{args.task} declares no knobs (task.json 'knobs'); pick a task that does", file=sys.stderr)
            return 2
        print(f"{args.task}: knobs " + ", ".join(f"{n} in {k['values']}" for n, k in sorted(knobs.items())))

        env = client.make(args.task, backend=args.backend, max_steps=args.steps)["env"]
        try:
            start = client.reset(env, seed=args.seed)["observation"]
            print(f"step 0 (starter): {start['status']}, speedup {start['speedup']:.3f}x")
            for _ in range(args.steps):
                values = {name: rng.choice(knob["values"]) for name, knob in knobs.items()}
                result = client.step(env, {"kind": "knobs", "values": values})
                obs = result["observation"]
                line = f"step {obs['step']}: {describe(values)} -> {obs['status']}"
                if obs["status"] == "ok":
                    ci = f"{obs['speedup_ci_low']:.3f}-{obs['speedup_ci_high']:.3f}"
                    line += f", speedup {obs['speedup']:.3f}x (95% CI {ci})"
                    if best is None or obs["speedup"] > best[0]:
                        best = (obs["speedup"], obs["step"], values)
                else:
                    line += f": {obs['message']}"
                print(f"{line}, reward {result['reward']:+.3f}" + (" (re-used)" if obs["reused"] else ""))
                if result["terminated"] or result["truncated"]:
                    break
        finally:
            client.close_env(env)

    if best is None:
        print("best: no setting was correct")
    else:
        print(f"best: {describe(best[2])} at step {best[1]}, speedup {best[0]:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
