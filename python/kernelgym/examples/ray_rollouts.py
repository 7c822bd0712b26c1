"""Many rollouts at once from Ray actors, against one or more kernelgym servers.

Each actor holds one ``kernelgym.Router`` over every server: each episode's env is placed on the
least loaded server (by its ``health``), all of that episode's calls go to it, and new episodes
skip a server that went down. The policy is random knobs (the task's template parameters), the
smallest one there is: replace ``choose_action`` with yours.

    pip install ray                                            # not a dependency of kernelgym
    build/cli/kernelgym serve --bind tcp://0.0.0.0:5555 &      # one or more servers (with runners)
    python -m kernelgym.examples.ray_rollouts --connect tcp://HOST_A:5555 --connect tcp://HOST_B:5555 \\
        --actors 8 --episodes 64 --steps 4

``--no-ray`` runs the same workers one after another in this process (what the test suite runs,
so that Ray is never needed to test it). Prints one line per episode and a summary: episodes per
server, mean return, best speedup, episodes per second.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kernelgym import Router


@dataclass
class Episode:
    seed: int
    server: str  # the address the Router placed it on
    steps: int
    episode_return: float
    best_speedup: float
    worker: int


def choose_action(rng: random.Random, knobs: dict[str, Any]) -> dict[str, Any]:
    """The policy: a random value for every knob (a ``knobs`` action), else submit."""
    if not knobs:
        return {"kind": "submit"}
    return {"kind": "knobs", "values": {name: rng.choice(k["values"]) for name, k in knobs.items()}}


class RolloutWorker:
    """One actor's worth of rollouts: its own Router (a Router is used by one thread at a time),
    episodes run one after another. Plain Python; ``ray.remote`` wraps it in ``run_ray``."""

    def __init__(self, addresses: Sequence[str], task: str, backend: str, steps: int, worker: int,
                 timeout_s: float = 600.0) -> None:  # fmt: skip
        self.router = Router(list(addresses), timeout_s=timeout_s)
        self.task, self.backend, self.steps, self.worker = task, backend, steps, worker
        self.knobs: dict[str, Any] = self.router.get_task(task).get("knobs") or {}

    def run(self, seeds: Sequence[int]) -> list[dict[str, Any]]:
        return [asdict(self.episode(seed)) for seed in seeds]

    def episode(self, seed: int) -> Episode:
        rng = random.Random(seed)
        env = self.router.make(self.task, backend=self.backend, max_steps=self.steps)["env"]
        try:
            server = self.router.address_of(env)
            obs = self.router.reset(env, seed=seed)["observation"]
            best, total, steps = obs["best_speedup"], 0.0, 0
            while True:
                result = self.router.step(env, choose_action(rng, self.knobs))
                steps += 1
                total += result["reward"]
                best = max(best, result["observation"]["best_speedup"])
                if result["terminated"] or result["truncated"]:
                    break
            return Episode(seed, server, steps, total, best, self.worker)
        finally:
            self.router.close_env(env)

    def close(self) -> None:
        self.router.close()


def split(seeds: Sequence[int], parts: int) -> list[list[int]]:
    """Seeds dealt out round robin to ``parts`` workers (none left empty while there are seeds)."""
    return [list(seeds[i::parts]) for i in range(min(parts, len(seeds)))]


def run_local(addresses: Sequence[str], task: str, backend: str, steps: int, seeds: Sequence[int],
              workers: int) -> list[dict[str, Any]]:  # fmt: skip
    """The rollouts without Ray: each worker's share in turn, in this process."""
    results: list[dict[str, Any]] = []
    for i, share in enumerate(split(seeds, workers)):
        worker = RolloutWorker(addresses, task, backend, steps, i)
        try:
            results.extend(worker.run(share))
        finally:
            worker.close()
    return results


def run_ray(addresses: Sequence[str], task: str, backend: str, steps: int, seeds: Sequence[int],
            actors: int, actor_cpus: float) -> list[dict[str, Any]]:  # fmt: skip
    """The rollouts on Ray actors (a local Ray unless RAY_ADDRESS names a cluster)."""
    import ray  # only here: Ray is the example's dependency, not kernelgym's

    ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)  # once: main() did
    Actor = ray.remote(num_cpus=actor_cpus)(RolloutWorker)
    shares = split(seeds, actors)
    workers = [Actor.remote(list(addresses), task, backend, steps, i) for i in range(len(shares))]
    try:
        batches = ray.get([w.run.remote(share) for w, share in zip(workers, shares)])
    finally:
        ray.get([w.close.remote() for w in workers])
        for w in workers:
            ray.kill(w)
    return [r for batch in batches for r in batch]


def summarize(results: Sequence[dict[str, Any]], seconds: float) -> list[str]:
    per_server = Counter(r["server"] for r in results)
    lines = [f"{n} episode(s) on {server}" for server, n in sorted(per_server.items())]
    if results:
        mean = sum(r["episode_return"] for r in results) / len(results)
        best = max(r["best_speedup"] for r in results)
        lines.append(f"{len(results)} episodes, mean return {mean:+.3f}, best speedup {best:.3f}x, "
                     f"{len(results) / max(seconds, 1e-9):.1f} episodes/s")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", "--address", dest="address", action="append", help="a server's client endpoint (repeat for several)")
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--backend", default="cpu", help="cpu, pallas, or null (a server run with --null-backend)")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4, help="steps per episode (its max_steps)")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--actor-cpus", type=float, default=0.25, help="Ray CPUs per actor (they mostly wait)")
    parser.add_argument("--seed", type=int, default=0, help="episode i gets seed + i")
    parser.add_argument("--no-ray", action="store_true", help="run the workers here, one after another")
    args = parser.parse_args(argv)
    addresses = args.address or ["tcp://127.0.0.1:5555"]
    if args.episodes < 1 or args.steps < 1 or args.actors < 1:
        parser.error("--episodes, --steps and --actors must be at least 1")
    seeds = [args.seed + i for i in range(args.episodes)]

    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("ray is not installed: `pip install ray`, or run with --no-ray", file=sys.stderr)
            return 2
        ray.init(include_dashboard=False, log_to_driver=False)  # before the clock: Ray's start is not rollouts
    start = time.monotonic()
    if args.no_ray:
        results = run_local(addresses, args.task, args.backend, args.steps, seeds, args.actors)
    else:
        results = run_ray(addresses, args.task, args.backend, args.steps, seeds, args.actors, args.actor_cpus)
    seconds = time.monotonic() - start
    for r in sorted(results, key=lambda r: r["seed"]):
        print(f"episode seed {r['seed']}: worker {r['worker']} on {r['server']}: {r['steps']} steps, "
              f"return {r['episode_return']:+.3f}, best {r['best_speedup']:.3f}x")  # fmt: skip
    for line in summarize(results, seconds):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
