"""The numeric view (kernelgym.numeric): a Box of features and a MultiDiscrete of knob indices that
Gymnasium's own checker accepts, and an episode driven by it on the real cpu backend."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import kernelgym
from kernelgym import Client
from kernelgym.numeric import KnobFeatureEnv, make_numeric

TASK = "cpu/softmax_rows"  # knobs EXP (strings), RECOMPUTE and SIMD (integers)


def test_gymnasiums_checker_accepts_the_numeric_view(server):
    # The null backend answers at once and deterministically, which the checker's seed tests need.
    env = make_numeric(TASK, backend="null", address=server.address, max_steps=8)
    try:
        assert isinstance(env.observation_space, spaces.Box) and env.observation_space.dtype == np.float32
        assert isinstance(env.action_space, spaces.MultiDiscrete)
        assert list(env.action_space.nvec) == [len(env.knob_values[k]) for k in env.knob_names]
        assert env.observation_space.shape == (len(env.feature_names),)
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_an_episode_of_knob_indices_on_the_cpu_backend(start_server):
    server = start_server("--local-runners", "1")
    with Client(server.address) as client:
        env = KnobFeatureEnv(kernelgym.make(TASK, client=client, max_steps=3, render_mode=None))
        obs, _ = env.reset(seed=1)
        assert env.observation_space.contains(obs)
        simd = env.knob_names.index("SIMD")
        action = np.zeros(len(env.knob_names), dtype=np.int64)
        action[simd] = env.knob_values["SIMD"].index(1)
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        assert obs[env.feature_names.index("status_ok")] == 1.0
        assert np.isfinite(reward)
        with pytest.raises(ValueError, match="knob indices"):
            env.step([0])
        env.close()


def test_a_task_without_knobs_is_refused(server):
    with Client(server.address, timeout_s=30) as client:
        plain = next(t["id"] for t in client.list_tasks() if not client.get_task(t["id"])["knobs"])
    with pytest.raises(ValueError, match="no knob template"):
        make_numeric(plain, backend="null", address=server.address)
