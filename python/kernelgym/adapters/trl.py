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

``KernelRollout`` is the other way in, ``GRPOTrainer(rollout_func=...)`` (TRL >= 1.x, experimental
there): TRL hands it the batch's prompts (each repeated ``num_generations`` times, as its sampler
draws them) and the trainer; it generates one completion per prompt with the trainer's own
generation path (vLLM server or colocated, or transformers), steps kernelgym with each one as
``KernelReward`` does, and returns the token ids and logprobs TRL trains on with kernelgym's reward,
status and speedup per completion as extra fields, which TRL passes to the reward functions:
``kernelgym_rollout_reward`` reads the reward back.

    rollout = KernelRollout("tcp://127.0.0.1:5555")
    rows = rollout.dataset(["cpu/softmax_rows", "cpu/rms_norm"])     # prompts it knows the tasks of
    trainer = GRPOTrainer(model=..., reward_funcs=[kernelgym_rollout_reward], rollout_func=rollout,
                          train_dataset=Dataset.from_list(rows * 64), args=GRPOConfig(...))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kernelgym import text
from kernelgym.client import Client
from kernelgym.env import KernelGymEnv
from kernelgym.errors import UnknownEnv
from kernelgym.group import TIES, Scored, Ties, score_groups

__all__ = ["KernelReward", "KernelRollout", "completion_text", "kernelgym_rollout_reward", "trainer_generate"]


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
    below every evaluated outcome). ``ties``: how a group's correct kernels whose speedup
    intervals overlap are paid (``"interval"``, the default: alike; ``"none"``: the server's
    rewards as measured; kernelgym.group). Identical kernels share one evaluation either way.
    Close it (or use ``with``) to close its envs and connection."""

    def __init__(self, address: str = "tcp://127.0.0.1:5555", *, reward: str = "log_speedup",
                 reward_config: Mapping[str, Any] | None = None, backend: str = "cpu", task_column: str = "task",
                 parse_error_reward: float | None = None, client: Client | None = None,
                 timeout_s: float = 600.0, ties: Ties = "interval") -> None:
        if ties not in TIES:
            raise ValueError(f"ties must be one of {TIES}, not {ties!r}")
        self.__name__ = f"kernelgym_{reward}"  # TRL logs each reward function under its __name__
        self.reward, self.reward_config, self.backend = reward, dict(reward_config or {}), backend
        self.task_column, self.parse_error_reward, self.timeout_s = task_column, parse_error_reward, timeout_s
        self.ties: Ties = ties
        self._owns_client = client is None
        self.client = client if client is not None else Client(address, timeout_s=timeout_s)
        self._envs: dict[str, KernelGymEnv] = {}
        self.starts: dict[str, dict[str, Any]] = {}  # task -> the observation of its env's reset

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float | None]:
        if completions is None:
            raise TypeError("KernelReward is called with completions=[...], as TRL's GRPOTrainer does")
        tasks = kwargs.get(self.task_column)
        if tasks is None or len(tasks) != len(completions):
            raise ValueError(f"every completion needs its task: a dataset column {self.task_column!r} "
                             f"(got {None if tasks is None else len(tasks)} values for {len(completions)} completions)")
        return [reward for reward, _ in self.score([str(t) for t in tasks], completions)]

    def score(self, tasks: Sequence[str], completions: Sequence[Any]) -> list[tuple[float, Scored | None]]:
        """Each completion's reward and its evaluation (None: the completion held no action, and
        its reward is the parse-error reward), in order; ``tasks[i]`` is completion i's task."""
        results: list[tuple[float, Scored | None]] = [(0.0, None)] * len(completions)
        by_task: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for i, (task, completion) in enumerate(zip(tasks, completions)):
            env = self._env(task)
            try:
                action = text.parse_action(completion_text(completion), self.backend)
            except text.ActionParseError:
                results[i] = (self._parse_error_reward(env), None)
                continue
            by_task.setdefault(task, []).append((i, action))
        try:
            scored_groups = self._score(by_task)
        except UnknownEnv:
            # A long pause between batches (evaluation, checkpointing) can outlast the server's idle
            # timeout, which closes the kept envs: make them again, once.
            for env in self._envs.values():
                env.close()
            self._envs.clear()
            scored_groups = self._score(by_task)
        for items, group in zip(by_task.values(), scored_groups):
            for (i, _), scored in zip(items, group):
                results[i] = (float(scored.reward), scored)
        return results

    def _score(self, by_task: Mapping[str, list[tuple[int, dict[str, Any]]]]) -> list[list[Any]]:
        groups = [(self._env(task), [action for _, action in items]) for task, items in by_task.items()]
        return score_groups(groups, timeout_s=self.timeout_s, ties=self.ties)

    def prompt(self, task: str, *, measurements: bool = True) -> list[dict[str, str]]:
        """The chat prompt of ``task``: kernelgym's system prompt and the starter's observation
        from the env this object scores the task on (so the starter is evaluated once, here and
        for the reward). ``measurements=False``: the starter's message without its timings
        (``kernelgym.text.starter_message``), the same on every run: a reproducible dataset."""
        env = self._env(task)
        opening = (text.observation_message(self.starts[task], env.task_info, self.backend) if measurements
                   else text.starter_message(env.task_info, self.backend))
        return [{"role": "system", "content": text.system_prompt(env.task_info, self.backend)}, opening]

    def dataset(self, tasks: Sequence[str], *, measurements: bool = True) -> list[dict[str, Any]]:
        """One row per task, ``{"prompt": [...], "task": task}``: ``Dataset.from_list(rows * n)``."""
        return [{"prompt": self.prompt(task, measurements=measurements), "task": task} for task in tasks]

    def _env(self, task: str) -> KernelGymEnv:
        if task not in self._envs:
            env = KernelGymEnv(task, backend=self.backend, reward=self.reward, reward_config=self.reward_config,
                               client=self.client, render_mode=None)
            self.starts[task], _ = env.reset(seed=0)  # the starter, evaluated once for the whole run
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


def trainer_generate(prompts: Sequence[Any], trainer: Any) -> tuple[list[list[int]], list[list[int]], Any]:
    """One completion per prompt, generated the way ``GRPOTrainer`` generates when it has no
    ``rollout_func``: its ``_tokenize_prompts`` (the chat template, its tools and
    ``chat_template_kwargs``) and ``_generate_single_turn`` (vLLM in server or colocate mode with
    its sampling settings, else transformers). These are TRL's own methods (TRL 1.16; private,
    so a later TRL may rename them). ``prompts`` holds each prompt ``num_generations`` times in a
    row, as TRL's sampler draws them, which is what vLLM's server mode expects. Returns
    ``(prompt_ids, completion_ids, logprobs)``; ``logprobs`` is None off vLLM."""
    training = bool(getattr(trainer.model, "training", True))
    group = trainer.num_generations if training else trainer.num_generations_eval
    prompt_ids, images, multimodal_fields = trainer._tokenize_prompts(list(prompts))
    completion_ids, logprobs = trainer._generate_single_turn(prompt_ids, images, multimodal_fields, group)
    return prompt_ids, completion_ids, logprobs


def _prompt_key(prompt: Any) -> str:
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


class KernelRollout:
    """``GRPOTrainer(rollout_func=KernelRollout(...), reward_funcs=[kernelgym_rollout_reward])``.

    TRL passes a rollout function only the prompts, not the dataset's other columns, so the task
    of each prompt comes from the prompts this object made: ``dataset(tasks)`` (or ``prompt(task)``)
    resets one env per task (the starter, evaluated once for the run), makes the prompt from its
    observation and remembers which task it is. Each completion is stepped from that env's
    state on a fork (``KernelReward.score``: every evaluation of the batch pipelined). The keywords
    are ``KernelReward``'s; ``generate`` replaces ``trainer_generate``. Close it (or use ``with``)."""

    def __init__(self, address: str = "tcp://127.0.0.1:5555", *, generate: Any = None, **reward_kwargs: Any) -> None:
        self.__name__ = "kernelgym_rollout"
        self.scorer = KernelReward(address, **reward_kwargs)
        self.generate = generate or trainer_generate
        self._tasks: dict[str, str] = {}

    def prompt(self, task: str, *, measurements: bool = True) -> list[dict[str, str]]:
        """The chat prompt of ``task`` (``KernelReward.prompt``), remembered as ``task``'s."""
        messages = self.scorer.prompt(task, measurements=measurements)
        self._tasks[_prompt_key(messages)] = task
        return messages

    def dataset(self, tasks: Sequence[str], *, measurements: bool = True) -> list[dict[str, Any]]:
        """One row per task, ``{"prompt": [...], "task": task}``: ``Dataset.from_list(rows * n)``."""
        return [{"prompt": self.prompt(task, measurements=measurements), "task": task} for task in tasks]

    def task_of(self, prompt: Any) -> str:
        task = self._tasks.get(_prompt_key(prompt))
        if task is None:
            raise ValueError("a prompt this KernelRollout did not make: build the dataset's prompts with "
                             "KernelRollout.dataset(tasks) or .prompt(task), in every training process")
        return task

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tasks = [self.task_of(prompt) for prompt in prompts]
        prompt_ids, completion_ids, logprobs = self.generate(prompts, trainer)
        if len(completion_ids) != len(prompts):
            raise ValueError(f"the generation made {len(completion_ids)} completions for {len(prompts)} prompts")
        completions = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        scored = self.scorer.score(tasks, completions)
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            # extra fields: TRL hands each reward function the completion's value under its name
            "kernelgym_reward": [reward for reward, _ in scored],
            "kernelgym_status": [s.status if s is not None else "no_action" for _, s in scored],
            "kernelgym_speedup": [s.speedup if s is not None else 0.0 for _, s in scored],
        }

    def close(self) -> None:
        self.scorer.close()

    def __enter__(self) -> KernelRollout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kernelgym_rollout_reward(kernelgym_reward: Sequence[float] | None = None, **kwargs: Any) -> list[float]:
    """The reward function that goes with ``KernelRollout``: the kernelgym reward it computed."""
    if kernelgym_reward is None:
        raise TypeError("no kernelgym_reward field: use this reward function with rollout_func=KernelRollout(...)")
    return [float(r) for r in kernelgym_reward]
