#!/usr/bin/env python3
"""PPO from Stable-Baselines3 on the numeric view of a cpu task (kernelgym.numeric): does a
standard RL library, unchanged, learn to choose a task's fastest knobs from real evaluations?

    pip install ./python stable-baselines3          # SB3 brings PyTorch: not in the test venv
    python bench/ppo_numeric.py [--task cpu/softmax_rows] [--timesteps 512] [--kernelgym build/cli/kernelgym]

One `kernelgym serve` with one local runner. Each episode is --episode-steps knob choices; the
reward is `log_speedup` (the log of the measured speedup: the bandit's payoff), so the best
policy picks the fastest combination every step. Every step is a real evaluation (compile,
correctness, timing: about a second for softmax_rows here), so the run takes minutes.

Prints: every combination's speedup (the exhaustive answer, read from the server afterwards),
PPO's mean reward over its first and last --window steps, and the combination the trained policy
picks deterministically, with its rank among all of them.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from kernelgym.numeric import make_numeric

from local_server import served


class Rewards(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.rewards: list[float] = []

    def _on_step(self) -> bool:
        self.rewards.extend(float(r) for r in self.locals["rewards"])
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--timesteps", type=int, default=512)
    parser.add_argument("--episode-steps", type=int, default=8)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernelgym", default=str(Path(__file__).resolve().parents[1] / "build/cli/kernelgym"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, served(args.kernelgym, Path(tmp), 1) as address:
        env = make_numeric(args.task, address=address, reward="log_speedup", max_steps=args.episode_steps)
        try:
            started = time.monotonic()
            model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=10, learning_rate=3e-3,
                        ent_coef=0.01, seed=args.seed, verbose=0)
            rewards = Rewards()
            model.learn(total_timesteps=args.timesteps, callback=rewards)
            trained_seconds = time.monotonic() - started

            # The exhaustive answer: every combination evaluated once more.
            speedups: dict[tuple[int, ...], float] = {}
            env.env.reset(seed=args.seed)
            for combo in itertools.product(*(range(n) for n in env.action_space.nvec)):
                knobs = {n: env.knob_values[n][i] for n, i in zip(env.knob_names, combo)}
                obs, _, terminated, truncated, _ = env.env.step({"kind": "knobs", "values": knobs})
                speedups[combo] = float(obs["speedup"])
                if terminated or truncated:
                    env.env.reset(seed=args.seed)
            obs, _ = env.reset(seed=args.seed)
            chosen = tuple(int(i) for i in model.predict(obs, deterministic=True)[0])
        finally:
            env.close()

    ranked = sorted(speedups, key=speedups.get, reverse=True)
    names = env.knob_names

    def label(combo: tuple[int, ...]) -> str:
        return ", ".join(f"{n}={env.knob_values[n][i]}" for n, i in zip(names, combo))

    print(f"{args.task}: {len(speedups)} knob combinations, PPO {args.timesteps} steps in {trained_seconds:.0f} s")
    for combo in ranked:
        print(f"  {speedups[combo]:6.3f}x  {label(combo)}")
    first, last = rewards.rewards[:args.window], rewards.rewards[-args.window:]
    print(f"mean reward (log speedup): first {len(first)} steps {np.mean(first):.3f}, last {len(last)} steps "
          f"{np.mean(last):.3f}; the best combination's {np.log(speedups[ranked[0]]):.3f}")
    print(f"trained policy picks: {label(chosen)} ({speedups[chosen]:.3f}x, rank {ranked.index(chosen) + 1} "
          f"of {len(ranked)})")


if __name__ == "__main__":
    main()
