#!/usr/bin/env python3
"""Group scoring (GRPO): G candidates from one prompt, three ways, side by side in one run.

    python3 bench/group_score.py [--group 8] [--repeats 3] [--local-runners 2] [--task cpu/softmax_rows]
                                 [--kernelgym build/cli/kernelgym]

  score       one reset (the starter evaluated once), then env.score(candidates): a fork per
              candidate, every step pipelined
  sequential  one reset, then for each candidate in turn: fork, step, close (G steps one at a time)
  vector      what a user of make_vec does: G envs, each reset (the starter evaluated G times),
              then each stepped with its candidate (pipelined by the vector env)

Every candidate is a distinct kernel (a comment of its own, so nothing is answered from a cache):
the task's starter and a faster honest kernel, alternately. Prints the wall time of each way per
group (median of --repeats) and its ratio to `score`, and the evaluations each ran (the server's
scheduler counter). Needs the kernelgym Python package (`pip install ./python`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import kernelgym
from kernelgym import Client

from local_server import served

REPO = Path(__file__).resolve().parents[1]


def candidates(task_dir: Path, fast: str, group: int, tag: str) -> list[str]:
    starter = (task_dir / "starter.cpp").read_text()
    return [f"// {tag} candidate {i}\n" + (fast if i % 2 else starter) for i in range(group)]


def completed(client: Client) -> int:
    return int(client.stats()["scheduler"]["completed"])


def by_score(client: Client, task: str, cands: list[str]) -> None:
    with kernelgym.make(task, reward="log_speedup", client=client) as env:
        env.reset(seed=1)
        scored = env.score(cands, group_relative=True)
        assert all(s.status == "ok" for s in scored), [s.status for s in scored]


def by_sequential_steps(client: Client, task: str, cands: list[str]) -> None:
    with kernelgym.make(task, reward="log_speedup", client=client) as env:
        env.reset(seed=1)
        for c in cands:
            fork = env.fork()
            _, _, _, _, _ = fork.step(c)
            fork.close()


def by_vector_env(client: Client, task: str, cands: list[str]) -> None:
    vec = kernelgym.make_vec(task, num_envs=len(cands), reward="log_speedup", client=client)
    try:
        vec.reset(seed=1)
        vec.step(cands)
    finally:
        vec.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--local-runners", type=int, default=2)
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    args = parser.parse_args()
    task_dir = REPO / "datasets/suites" / args.task
    fast = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
    ways = {"score": by_score, "sequential": by_sequential_steps, "vector": by_vector_env}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    evaluations: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp, served(args.kernelgym, Path(tmp), args.local_runners) as address:
        with Client(address) as client:
            for repeat in range(args.repeats):
                for name, way in ways.items():  # interleaved: the machine's noise falls on all three
                    cands = candidates(task_dir, fast, args.group, f"{name} {repeat}")
                    before = completed(client)
                    start = time.perf_counter()
                    way(client, args.task, cands)
                    seconds[name].append(time.perf_counter() - start)
                    evaluations[name] = completed(client) - before
    base = statistics.median(seconds["score"])
    print(f"G={args.group} on {args.task}, {args.local_runners} local runners, median of {args.repeats}:")
    for name in ways:
        median = statistics.median(seconds[name])
        print(f"  {name:<10} {median:6.2f} s  ({median / base:4.2f}x score)  {evaluations[name]} evaluations  "
              f"runs: {', '.join(f'{s:.2f}' for s in seconds[name])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
