"""kernelgym as verl's custom reward function (``custom_reward_function.path`` / ``.name`` in the
trainer config).

verl's reward managers call it in two shapes: the naive and prime managers once per sample,
``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)``, returning
a float; the batch manager once per batch, ``compute_score(data_sources=[...], solution_strs=[...],
ground_truths=[...], extra_infos=[...])``, returning a list. Point ``name`` at ``compute_score``
or ``compute_score_batch``. The sample's task is ``extra_info["task"]`` (else ``ground_truth``);
the server is ``extra_info["address"]``, else ``$KERNELGYM_ADDRESS``, else the default address.
One ``KernelReward`` per server and reward is kept for the process, so each task's starter is
evaluated once per training run.

    custom_reward_function:
      path: <site-packages>/kernelgym/adapters/verl.py
      name: compute_score_batch
    reward_model:
      reward_manager: batch
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from kernelgym.adapters.trl import KernelReward

__all__ = ["compute_score", "compute_score_batch"]

_DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"
_rewards: dict[tuple[str, str, str], KernelReward] = {}


def _reward_for(extra_info: Mapping[str, Any] | None) -> KernelReward:
    info = extra_info or {}
    address = str(info.get("address") or os.environ.get("KERNELGYM_ADDRESS") or _DEFAULT_ADDRESS)
    reward = str(info.get("reward") or "log_speedup")
    backend = str(info.get("backend") or "cpu")
    key = (address, reward, backend)
    if key not in _rewards:
        _rewards[key] = KernelReward(address, reward=reward, backend=backend)
    return _rewards[key]


def _task(ground_truth: Any, extra_info: Mapping[str, Any] | None) -> str:
    task = (extra_info or {}).get("task") or ground_truth
    if not isinstance(task, str) or not task:
        raise ValueError("kernelgym's verl reward needs the task: extra_info['task'] (or ground_truth) = 'cpu/softmax_rows'")
    return task


def compute_score(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                  extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> float:
    """One sample's reward (verl's naive reward manager)."""
    reward = _reward_for(extra_info)
    [score] = reward(completions=[solution_str], task=[_task(ground_truth, extra_info)])
    return float(score) if score is not None else 0.0


def compute_score_batch(data_sources: Sequence[Any] = (), solution_strs: Sequence[str] = (),
                        ground_truths: Sequence[Any] = (), extra_infos: Sequence[Mapping[str, Any] | None] = (),
                        **kwargs: Any) -> list[float]:
    """A batch's rewards (verl's batch reward manager): each server's samples scored together, each
    task's as one group."""
    infos = list(extra_infos) or [None] * len(solution_strs)
    truths = list(ground_truths) or [None] * len(solution_strs)
    scores: list[float] = [0.0] * len(solution_strs)
    by_reward: dict[int, tuple[KernelReward, list[int]]] = {}
    for i, info in enumerate(infos):
        reward = _reward_for(info)
        by_reward.setdefault(id(reward), (reward, []))[1].append(i)
    for reward, indices in by_reward.values():
        got = reward(completions=[solution_strs[i] for i in indices], task=[_task(truths[i], infos[i]) for i in indices])
        for i, score in zip(indices, got):
            scores[i] = float(score) if score is not None else 0.0
    return scores


def close() -> None:
    """Closes the process's envs and connections (at the end of training)."""
    for reward in _rewards.values():
        reward.close()
    _rewards.clear()
