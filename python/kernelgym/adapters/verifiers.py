"""kernelgym as a verifiers environment (``verifiers`` 0.4, the ``verifiers.v1`` API that prime-rl
and ``vf-eval`` load): each rollout is one kernelgym episode, played turn by turn.

verifiers 0.4 splits an environment into a ``Taskset`` (config in, tasks out) and an ``Env`` whose
``run(task, agents)`` drives an agent's ``interaction``: ``await interaction.turn(message)`` sends
one user message, lets the model answer, and returns the answer as a ``Segment``. Here:

- ``KernelGymTaskset`` yields one task per kernelgym task (``tasks``, or every task of ``suite``
  on the server), its ``system_prompt`` ``kernelgym.text.system_prompt``'s. The task has no
  prompt: the env opens the conversation.
- ``KernelGymEnvironment.run`` forks the task's episode (reset once per task and seed for the
  whole run, so a GRPO group of n rollouts evaluates the starter once, not n times), opens the
  conversation with the starter's observation (``kernelgym.text.observation_message``), and
  then, each turn, reads the model's reply into an action (``kernelgym.text.parse_action``),
  steps the fork and answers with the next observation. A reply with no action is not stepped:
  the model is told why (``kernelgym.examples.grpo_rollout.parse_error_message``) and the turn
  costs ``parse_error_reward`` (default: the reward's minimum). The rollout ends when the episode
  ends (submitted, or a budget spent) or the agent's ``max_turns`` is reached.
- The rollout's reward, ``kernelgym``, is the sum of kernelgym's rewards over its turns (with the
  default ``log_speedup_gain`` the sum is the log speedup of the best kernel over the starter);
  the metrics ``kernelgym_steps``, ``kernelgym_parse_errors`` and ``kernelgym_best_speedup``, and
  ``trace.info["kernelgym"]`` (each turn's reward and status), go with it.

verifiers finds a taskset by its id, which has to name an importable top-level module: the
wheel's ``kernelgym_verifiers`` re-exports these classes, so the id is ``kernelgym-verifiers``::

    vf-eval kernelgym-verifiers --env.taskset.address tcp://127.0.0.1:5555 ...

or from Python, ``load_environment(address=..., tasks=[...])`` (the keywords of
``KernelGymTasksetConfig``, plus ``max_turns``). The agent plays with verifiers' ``null`` harness
(a chat loop that runs no code) in a local subprocess; kernelgym's own server does the
evaluating. docs/python.md, "Training with verifiers", has a ``vf-eval`` run over a local vLLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import verifiers.v1 as vf

from kernelgym import text
from kernelgym.client import AsyncClient, Client
from kernelgym.errors import UnknownEnv
from kernelgym.examples.grpo_rollout import parse_error_message

__all__ = [
    "TASKSET_ID",
    "KernelGymTasksetConfig",
    "KernelGymTaskData",
    "KernelGymTask",
    "KernelGymTaskset",
    "KernelGymEnvConfig",
    "KernelGymEnvironment",
    "load_environment",
]

TASKSET_ID = "kernelgym-verifiers"  # verifiers imports it as the module kernelgym_verifiers


class KernelGymTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which kernelgym server, tasks and reward."""

    address: str = "tcp://127.0.0.1:5555"
    """The kernelgym server's client endpoint (``kernelgym serve``)."""
    tasks: list[str] = []
    """Task ids (``cpu/softmax_rows``); empty: every task of ``suite`` that has a ``backend`` version."""
    suite: str = ""
    backend: str = "cpu"
    reward: str = "log_speedup_gain"
    """kernelgym's reward (docs/adding_a_reward.md); the rollout's reward is its sum over the turns."""
    reward_config: dict[str, Any] = {}
    max_steps: int = 0
    """The episode's step limit (0: the server's default)."""
    seed: int = 0
    """The episodes' seed (inputs, timing): every rollout of a task plays the same episode."""
    parse_error_reward: float | None = None
    """For a reply with no action in it (None: the reward's minimum, below every evaluated outcome)."""
    timeout_s: float = 600.0


class KernelGymTaskData(vf.TaskData):
    task: str
    """The kernelgym task id."""
    seed: int = 0


class KernelGymTask(vf.Task[KernelGymTaskData, vf.State, vf.TaskConfig]):
    pass


class KernelGymTaskset(vf.Taskset[KernelGymTask, KernelGymTasksetConfig]):
    def load(self) -> Iterator[KernelGymTask]:
        config = self.config
        with Client(config.address, timeout_s=config.timeout_s) as client:
            client.hello()  # the backends' descriptors, for kernelgym.text
            names = list(config.tasks) or [t["id"] for t in client.list_tasks(config.suite)
                                           if config.backend in t.get("backends", [config.backend])]
            infos = [client.get_task(name) for name in names]
        for name, info in zip(names, infos):
            data = KernelGymTaskData(id=name, name=name, task=name, seed=config.seed,
                                     description=str(info.get("description", "")),
                                     system_prompt=text.system_prompt(info, config.backend))
            yield KernelGymTask(data, config.task)


class KernelGymEnvConfig(vf.EnvConfig):
    """``--env.*``: the one seat, ``agent`` (``--env.agent.max-turns``, ``--env.agent.model``, ...)."""

    agent: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig(), max_turns=4)


@dataclass
class _Root:
    """A task's episode, reset once; every rollout plays a fork of it."""

    env: str
    opening: str  # the starter's observation: the rollout's first user message
    reward_min: float


class KernelGymEnvironment(vf.Env[KernelGymEnvConfig]):
    """One kernelgym episode per rollout (the module's doc). Its kernelgym connection is an
    ``AsyncClient`` made at the first rollout, on the event loop the env's rollouts run on; the
    root episodes and the connection are closed by ``stop()`` (the end of verifiers' ``serving()``)."""

    def __init__(self, config: KernelGymEnvConfig) -> None:
        super().__init__(config)
        self._client: AsyncClient | None = None
        self._roots: dict[tuple[str, int], _Root] = {}
        self._root_locks: dict[tuple[str, int], asyncio.Lock] = {}

    @property
    def kernelgym(self) -> KernelGymTasksetConfig:
        return self.taskset.config

    async def run(self, task: KernelGymTask, agents: vf.Agents) -> None:
        config = self.kernelgym
        client = self._connection()
        env, root = await self._fork(task.data)
        no_action = root.reward_min if config.parse_error_reward is None else float(config.parse_error_reward)
        rewards: list[float] = []
        statuses: list[str] = []
        best_speedup, parse_errors, finished = 0.0, 0, False
        try:
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn(root.opening)
                while not segment.terminated:  # terminated: the agent's max_turns (or a limit) ended it
                    try:
                        action = text.parse_action(segment.last_reply, config.backend)
                    except text.ActionParseError as error:
                        parse_errors += 1
                        rewards.append(no_action)
                        statuses.append("no_action")
                        answer = parse_error_message(error, config.backend)["content"]
                    else:
                        result = await client.step(env, action)
                        observation = result["observation"]
                        rewards.append(float(result["reward"]))
                        statuses.append(str(observation.get("status", "")))
                        best_speedup = float(observation.get("best_speedup", best_speedup))
                        if result["terminated"] or result["truncated"]:
                            finished = True
                            break  # the episode is over: leaving the interaction ends the exchange
                        answer = text.observation_message(observation, backend=config.backend)["content"]
                    segment = await interaction.turn(answer)
        finally:
            await client.close_env(env)
        trace = interaction.trace
        trace.record_reward("kernelgym", sum(rewards))
        trace.record_metrics({"kernelgym_steps": float(len(rewards) - parse_errors),
                              "kernelgym_parse_errors": float(parse_errors),
                              "kernelgym_best_speedup": best_speedup})
        trace.info["kernelgym"] = {"task": task.data.task, "seed": task.data.seed, "rewards": rewards,
                                   "statuses": statuses, "finished": finished}

    async def stop(self) -> None:
        client, self._client = self._client, None
        roots, self._roots = list(self._roots.values()), {}
        if client is None:
            return
        try:
            for root in roots:
                try:
                    await client.close_env(root.env)
                except UnknownEnv:
                    pass  # the server's idle timeout closed it already
        finally:
            await client.close()

    def _connection(self) -> AsyncClient:
        if self._client is None:
            self._client = AsyncClient(self.kernelgym.address, timeout_s=self.kernelgym.timeout_s)
        return self._client

    async def _fork(self, data: KernelGymTaskData) -> tuple[str, _Root]:
        client = self._connection()
        root = await self._root(data)
        try:
            return (await client.fork(root.env))["env"], root
        except UnknownEnv:
            # A pause longer than the server's idle timeout closed the root: make it again, once.
            root = await self._root(data, stale=root)
            return (await client.fork(root.env))["env"], root

    async def _root(self, data: KernelGymTaskData, stale: _Root | None = None) -> _Root:
        key = (data.task, data.seed)
        async with self._root_locks.setdefault(key, asyncio.Lock()):  # a group's rollouts start together
            if key in self._roots and self._roots[key] is not stale:
                return self._roots[key]
            config, client = self.kernelgym, self._connection()
            await client.hello()  # the backends' descriptors, for kernelgym.text
            info = await client.get_task(data.task)
            made = await client.make(data.task, backend=config.backend, reward=config.reward,
                                     reward_config=config.reward_config or None, max_steps=config.max_steps)
            start = await client.reset(made["env"], seed=data.seed)
            opening = text.observation_message(start["observation"], info, config.backend)["content"]
            self._roots[key] = _Root(made["env"], opening, float(made["reward_min"]))
            return self._roots[key]


def load_environment(*, max_turns: int = 4, **taskset: Any) -> KernelGymEnvironment:
    """The environment, built the way verifiers builds one (``vf.load_environment``): ``taskset``
    holds ``KernelGymTasksetConfig``'s fields (``address``, ``tasks``, ``reward``, ...), ``max_turns``
    the agent's replies at most."""
    config = KernelGymEnvConfig.model_validate({"taskset": {"id": TASKSET_ID, **taskset},
                                                "agent": {"max_turns": max_turns}})
    env = vf.load_environment(config)
    if not isinstance(env, KernelGymEnvironment):  # the id resolved to another module
        raise TypeError(f"verifiers resolved the taskset id {TASKSET_ID!r} to {type(env).__name__}")
    return env
