"""The numeric view of a templated task, for SB3/CleanRL-style RL libraries.

``KernelGymEnv``'s observation is a Dict with seven text fields sized for whole kernels: right for
an LLM policy, wrong for a library that flattens observations into one vector (flattening it
costs some 200 MB an observation). ``KnobFeatureEnv`` shows the same episode as numbers: the
observation is the feature vector (``obs["features"]``: the result's status and stage one-hot,
log speedup and its interval, roofline and profile figures, steps left — ``env.feature_names``),
and the action is one index per knob of the task's template (a ``MultiDiscrete``), sent as a
``knobs`` action. The reward and the episode are the server's, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from kernelgym.env import KernelGymEnv, make

__all__ = ["KnobFeatureEnv", "make_numeric"]


class KnobFeatureEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """A ``Box`` of features in, a ``MultiDiscrete`` of knob indices out, over a ``KernelGymEnv``
    of a task with a knob template (``task_info["knobs"]``; ValueError without one). Knobs are in
    name order (``knob_names``); index i of knob k is ``knob_values[k][i]``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: KernelGymEnv) -> None:
        if not env.spaces.knobs:
            raise ValueError(f"task {env.env_info['task']!r} has no knob template: the numeric view acts through knobs")
        if "knobs" not in env.action_kinds:
            raise ValueError("the server offers no 'knobs' action")
        self.env = env
        self.knob_names: tuple[str, ...] = tuple(env.spaces.knobs)
        self.knob_values: dict[str, tuple[Any, ...]] = dict(env.spaces.knobs)
        features = env.observation_space["features"]
        assert isinstance(features, spaces.Box)
        self.observation_space = spaces.Box(low=features.low, high=features.high, dtype=np.float32)
        self.action_space = spaces.MultiDiscrete([len(self.knob_values[k]) for k in self.knob_names])
        self._knobs_kind = env.action_kinds.index("knobs")

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.env.feature_names

    def reset(self, *, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=dict(options) if options else None)
        return np.asarray(obs["features"], dtype=np.float32), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        indices = np.asarray(action, dtype=np.int64).reshape(-1)
        if indices.shape != (len(self.knob_names),):
            raise ValueError(f"an action is {len(self.knob_names)} knob indices ({', '.join(self.knob_names)}), "
                             f"not {np.asarray(action).tolist()}")
        sample = {"kind": self._knobs_kind, "knobs": dict(zip(self.knob_names, indices.tolist()))}
        obs, reward, terminated, truncated, info = self.env.step(sample)
        return np.asarray(obs["features"], dtype=np.float32), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()
        super().close()


def make_numeric(task: str, **make_kwargs: Any) -> KnobFeatureEnv:
    """``KnobFeatureEnv(kernelgym.make(task, render_mode=None, **make_kwargs))``."""
    env = make(task, render_mode=None, **make_kwargs)
    try:
        return KnobFeatureEnv(env)
    except BaseException:
        env.close()
        raise
