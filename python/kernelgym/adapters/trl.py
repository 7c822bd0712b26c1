"""A reward function for TRL's ``GRPOTrainer``: every completion's kernel, evaluated by kernelgym.

TRL calls each reward function with keyword arguments — ``prompts``, ``completions`` (strings, or
lists of messages in conversational datasets), sometimes ``completion_ids``, ``step``,
``run_name``, ``trainer_state`` — plus every column of the training dataset, one value per
completion, and reads back one float per completion (None: not applicable). ``KernelReward``
reads the task of each completion from a dataset column (``task`` by default), turns each
completion into an action with ``kernelgym.text.parse_action``, and scores each task's
completions as one group (``kernelgym.score_groups``: forks of one env per task, all steps
pipelined). The per-task env is reset once and kept, so a task's starter is evaluated once per
training run, not once per completion.

    from trl import GRPOConfig, GRPOTrainer
    from kernelgym.adapters.trl import KernelReward
    reward = KernelReward(address="tcp://127.0.0.1:5555")      # reward "log_speedup" by default
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, args=GRPOConfig(...))

A dataset row needs a ``prompt`` (``kernelgym.text.system_prompt`` and ``observation_message`` make
one from a task) and a ``task`` column. docs/python.md has a whole training script.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelgym import text
from kernelgym.client import Client
from kernelgym.env import KernelGymEnv
from kernelgym.errors import UnknownEnv
from kernelgym.group import score_groups

__all__ = ["KernelReward", "completion_text"]


def completion_text(completion: Any) -> str:
    """The model's reply in a TRL completion: a string, or (conversational) a list of messages
    whose assistant turns are joined."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        return "\n".join(str(m.get("content") or "") for m in completion
                         if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant")
    raise TypeError(f"a completion is a str or a list of messages, not {type(completion).__name__}")


class KernelReward:
    """``reward_funcs=[KernelReward(...)]``. ``reward``: the kernelgym reward (docs/adding_a_reward.md;
    ``log_speedup`` is strictly monotone in speed, the right one for group-relative advantages).
    ``parse_error_reward``: for a completion with no action in it (default: the reward's minimum,
    below every evaluated outcome). Close it (or use ``with``) to close its envs and connection."""

    def __init__(self, address: str = "tcp://127.0.0.1:5555", *, reward: str = "log_speedup",
                 reward_config: Mapping[str, Any] | None = None, backend: str = "cpu", task_column: str = "task",
                 parse_error_reward: float | None = None, client: Client | None = None,
                 timeout_s: float = 600.0) -> None:
        self.__name__ = f"kernelgym_{reward}"  # TRL logs each reward function under its __name__
        self.reward, self.reward_config, self.backend = reward, dict(reward_config or {}), backend
        self.task_column, self.parse_error_reward, self.timeout_s = task_column, parse_error_reward, timeout_s
        self._owns_client = client is None
        self.client = client if client is not None else Client(address, timeout_s=timeout_s)
        self._envs: dict[str, KernelGymEnv] = {}

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float | None]:
        if completions is None:
            raise TypeError("KernelReward is called with completions=[...], as TRL's GRPOTrainer does")
        tasks = kwargs.get(self.task_column)
        if tasks is None or len(tasks) != len(completions):
            raise ValueError(f"every completion needs its task: a dataset column {self.task_column!r} "
                             f"(got {None if tasks is None else len(tasks)} values for {len(completions)} completions)")
        rewards: list[float | None] = [None] * len(completions)
        by_task: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for i, (task, completion) in enumerate(zip(tasks, completions)):
            env = self._env(str(task))
            try:
                action = text.parse_action(completion_text(completion), self.backend)
            except text.ActionParseError:
                rewards[i] = self._parse_error_reward(env)
                continue
            by_task.setdefault(str(task), []).append((i, action))
        try:
            results = self._score(by_task)
        except UnknownEnv:
            # A long pause between batches (evaluation, checkpointing) can outlast the server's idle
            # timeout, which closes the kept envs: make them again, once.
            for env in self._envs.values():
                env.close()
            self._envs.clear()
            results = self._score(by_task)
        for (task, items), scored in zip(by_task.items(), results):
            for (i, _), s in zip(items, scored):
                rewards[i] = s.reward
        return rewards

    def _score(self, by_task: Mapping[str, list[tuple[int, dict[str, Any]]]]) -> list[list[Any]]:
        groups = [(self._env(task), [action for _, action in items]) for task, items in by_task.items()]
        return score_groups(groups, timeout_s=self.timeout_s)

    def _env(self, task: str) -> KernelGymEnv:
        if task not in self._envs:
            env = KernelGymEnv(task, backend=self.backend, reward=self.reward, reward_config=self.reward_config,
                               client=self.client, render_mode=None)
            env.reset(seed=0)  # the starter, evaluated once for the whole run
            self._envs[task] = env
        return self._envs[task]

    def _parse_error_reward(self, env: KernelGymEnv) -> float:
        if self.parse_error_reward is not None:
            return float(self.parse_error_reward)
        return float(env.env_info["reward_min"])

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> KernelReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
