"""A kernelgym episode as a ``gymnasium.Env``: one server env, driven through a ``Client``.

``make(task, ...)`` (or ``gymnasium.make("kernelgym/KernelGym-v0", task=...)``) returns a
``KernelGymEnv``; ``kernelgym.vector`` batches many envs over one connection.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec

from kernelgym import group
from kernelgym.client import Client
from kernelgym.errors import TransportError, UnknownEnv
from kernelgym.group import Scored
from kernelgym.router import Router
from kernelgym.spaces import EnvSpaces

__all__ = ["ENV_ID", "KernelGymEnv", "make", "server_seed"]

ENV_ID = "kernelgym/KernelGym-v0"
DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"
# Seeds the env draws itself stay below 2^53, like the server's (docs/protocol.md).
_SEED_BOUND = 1 << 53


def server_seed(seed: int | None, np_random: np.random.Generator) -> int:
    """The seed an ``env.reset`` sends: ``seed`` itself, or one drawn from ``np_random``.

    Drawing from the env's generator (seeded by the last ``reset(seed=...)``) makes the resets
    after a seeded one reproducible too, as Gymnasium expects of ``reset()``.
    """
    return int(seed) if seed is not None else int(np_random.integers(0, _SEED_BOUND))


def make_spec(
    task: str,
    backend: str,
    reward: str,
    reward_config: Mapping[str, Any] | None,
    address: str | Sequence[str],
    max_steps: int,
    time_budget_s: float,
    record: bool,
    deterministic: bool = False,
) -> EnvSpec:
    """The spec that ``gymnasium.make`` would give this env (``spec.make()`` makes another).

    ``deterministic``: the backend answers the same every time (its descriptor says the server
    evaluates it itself, as the null backend); timings differ from run to run everywhere else.
    """
    return EnvSpec(
        id=ENV_ID,
        entry_point="kernelgym.env:KernelGymEnv",
        vector_entry_point="kernelgym.vector:KernelGymVectorEnv",
        nondeterministic=not deterministic,
        kwargs={
            "task": task,
            "backend": backend,
            "reward": reward,
            "reward_config": dict(reward_config or {}),
            "address": address,
            "max_steps": max_steps,
            "time_budget_s": time_budget_s,
            "record": record,
        },
    )


class KernelGymEnv(gymnasium.Env[dict[str, Any], Any]):
    """One kernelgym episode (docs/protocol.md) as a Gymnasium environment.

    The env makes one server env at construction (``env.make``) and closes it in ``close()``.
    ``reset(seed=...)`` evaluates the task's starter (step 0); ``step(action)`` applies an action
    and evaluates the result. ``submit`` terminates the episode; spending ``max_steps`` or the
    time budget truncates it; stepping after either raises ``kernelgym.errors.EpisodeOver``.

    **Observation** (``observation_space``, a ``Dict``):

    ========================================================  ====================================
    key                                                       space
    ========================================================  ====================================
    ``text`` (Markdown), ``source``, ``status``, ``stage``,   ``UnicodeText(max_message_bytes)``:
    ``message``, ``action_error``                             any ``str`` up to that length
    ``features``                                              ``Box(float32, len(feature_names))``,
                                                              bounds the server's clamping
                                                              (``spaces.feature_bounds``)
    ``speedup``, ``speedup_ci_low``, ``speedup_ci_high``,     ``Box(0, float64 max, (), float64)``
    ``best_speedup``                                          (0-d arrays)
    ``step``, ``steps_left``                                  ``Discrete(max_steps + 1)``
    ``reused``                                                ``Discrete(2)``
    ========================================================  ====================================

    ``features[i]`` is ``feature_names[i]`` (from ``hello``). The observation's other fields —
    ``report`` (the evaluation record, or None), ``seconds_left`` and any a newer server adds —
    are in ``info`` next to the server's info (``seed``, ``runner``, ``eval_seconds``, ``outcome``,
    ...).

    **Action** (``action_space``, a ``Dict``; a sample is turned into the wire action of its kind,
    and only the key of that kind is read):

    ==============  ==========================================================  =================
    key             space                                                       wire action
    ==============  ==========================================================  =================
    ``kind``        ``Discrete(len(action_kinds))``, an index into              (selects)
                    ``action_kinds`` (hello's, in its order)
    ``source``      ``UnicodeText(n)``                                          ``replace``
    ``edits``       ``Sequence(Dict(search=UnicodeText(n), replace=...))``      ``edit``
    ``diff``        ``UnicodeText(n)``                                          ``patch``
    ``knobs``       ``Dict(NAME: Discrete(len(values)))``, an index into each   ``knobs``
                    knob's declared ``values``; only when the task has knobs
                    (without, ``knobs`` sends ``{}``: an invalid action)
    ``to_step``     ``Discrete(max_steps + 1)``                                 ``revert``
    (none)                                                                      ``submit``
    ==============  ==========================================================  =================

    ``n`` is ``max_message_bytes // 128``, so that a sample always fits one request. ``step``
    also takes a wire-form dict (``{"kind": "edit", "edits": [...]}``, sent as it is, any length)
    and a plain ``str`` (``replace``). An empty ``edits`` sequence raises ValueError (the
    protocol requires a block).

    **Seeds**: ``reset(seed=s)`` sends ``s`` to the server, which derives every input of the
    episode from it; ``reset()`` sends a seed drawn from ``np_random``, so a sequence of resets
    after a seeded one repeats. The null backend is deterministic for a seed; timing backends are
    not (``spec.nondeterministic``).

    **Rendering**: ``render_mode="ansi"`` (the default): ``render()`` returns the observation's
    Markdown ``text``. ``render_mode=None``: nothing.
    """

    # render_fps: Gymnasium wants one with any render mode; only recording wrappers read it.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        task: str,
        backend: str = "cpu",
        reward: str = "log_speedup_gain",
        reward_config: Mapping[str, Any] | None = None,
        address: str | Sequence[str] = DEFAULT_ADDRESS,
        max_steps: int = 0,
        time_budget_s: float = 0.0,
        record: bool = False,
        render_mode: str | None = "ansi",
        client: Client | Router | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']} or None")
        self.render_mode = render_mode
        self._owns_client = client is None
        if client is None:
            # Several addresses: a Router places the env on one of them (kernelgym.router).
            client = (Client(address, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
                      if isinstance(address, str) else Router(address, timeout_s=timeout_s))
        self._client: Client | Router | None = client
        self._env: str | None = None
        try:
            self.hello: dict[str, Any] = self._client.hello()
            self.task_info: dict[str, Any] = self._client.get_task(task)
            self.env_info: dict[str, Any] = self._client.make(
                task,
                backend=backend,
                reward=reward,
                reward_config=dict(reward_config or {}),
                max_steps=max_steps,
                time_budget_s=time_budget_s,
                record=record,
            )
        except BaseException:
            self.close()
            raise
        self._env = self.env_info["env"]
        self._init_spaces(EnvSpaces(self.hello, self.task_info, self.env_info["max_steps"]))
        deterministic = any(
            info.get("name") == backend and info.get("evaluated_by_server") is True
            for info in self.hello.get("backend_info", [])
        )
        self.spec = make_spec(
            task, backend, reward, reward_config, self._client.address, max_steps, time_budget_s, record, deterministic
        )

    def _init_spaces(self, env_spaces: EnvSpaces) -> None:
        self.spaces = env_spaces
        self.observation_space = env_spaces.observation_space
        self.action_space = env_spaces.action_space
        self._text: str | None = None  # the last observation's Markdown, for render()

    @property
    def client(self) -> Client | Router:
        """The connection this env talks through (its own, unless one was passed in)."""
        if self._client is None:
            raise gymnasium.error.ClosedEnvironmentError("the env is closed")
        return self._client

    @property
    def env_id(self) -> str | None:
        """The server's id of this env; None once closed."""
        return self._env

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.spaces.feature_names

    @property
    def action_kinds(self) -> tuple[str, ...]:
        """What ``action['kind']`` indexes."""
        return self.spaces.action_kinds

    def _require_env(self) -> str:
        if self._env is None:
            raise gymnasium.error.ClosedEnvironmentError("the env is closed")
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Starts an episode: the starter kernel, evaluated (step 0). ``options`` takes no keys."""
        super().reset(seed=seed)
        if options:
            raise ValueError(f"KernelGymEnv.reset takes no options, got {sorted(options)}")
        result = self.client.reset(self._require_env(), seed=server_seed(seed, self.np_random))
        obs, info = self.spaces.observation(result["observation"], result["info"])
        self._text = obs["text"]
        return obs, info

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Applies ``action`` (a space sample, a wire-form dict or a str: see the class) and
        evaluates the new source."""
        wire = self.spaces.wire_action(action)
        result = self.client.step(self._require_env(), wire)
        obs, info = self.spaces.observation(result["observation"], result["info"])
        self._text = obs["text"]
        return obs, float(result["reward"]), bool(result["terminated"]), bool(result["truncated"]), info

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn("render() without a render_mode: make the env with render_mode='ansi'")
            return None
        if self._text is None:
            raise gymnasium.error.ResetNeeded("render() before reset(): there is no observation yet")
        return self._text

    def fork(self) -> KernelGymEnv:
        """A copy of this episode in a new server env (``env.fork``), on the same connection.

        Stepping either never changes the other; the fork's ``np_random`` starts as a copy of
        this env's. Closing the fork leaves the connection open.
        """
        made = self.client.fork(self._require_env())
        twin = object.__new__(type(self))
        twin.render_mode = self.render_mode
        twin._owns_client = False
        twin._client = self._client
        twin.hello, twin.task_info, twin.env_info = self.hello, self.task_info, made
        twin._env = made["env"]
        twin._init_spaces(self.spaces)
        twin._text = self._text
        twin.spec = self.spec
        twin._np_random = copy.deepcopy(self._np_random)
        twin._np_random_seed = self._np_random_seed
        return twin

    def score(self, candidates: Sequence[Any], *, group_relative: bool = False,
              timeout_s: float | None = None, ties: group.Ties = "interval") -> list[Scored]:
        """Scores G candidate actions from this state in one call, for GRPO-style training: a fork
        per distinct candidate, all stepped at once; this env is not stepped (kernelgym.group).
        Identical kernels share one evaluation; ``ties="interval"`` pays correct candidates whose
        speedup intervals overlap alike (``"none"``: the server's rewards as they are).
        ``group_relative`` adds each candidate's advantage, ``(reward - mean) / std`` over the
        group; use a reward that is strictly monotone in speed for it (``reward="log_speedup"``,
        docs/adding_a_reward.md)."""
        return group.score(self, candidates, group_relative=group_relative, timeout_s=timeout_s, ties=ties)

    def close(self) -> None:
        """Closes the server env, and the connection when the env made it. Safe to call again;
        a server env already gone (reaped, or the server unreachable) is not an error here."""
        env, self._env = self._env, None
        client, self._client = self._client, None
        try:
            if env is not None and client is not None:
                try:
                    client.close_env(env)
                except (UnknownEnv, TransportError):
                    pass
        finally:
            if client is not None and self._owns_client:
                client.close()
        super().close()


def make(
    task: str,
    backend: str = "cpu",
    reward: str = "log_speedup_gain",
    reward_config: Mapping[str, Any] | None = None,
    address: str | Sequence[str] = DEFAULT_ADDRESS,
    max_steps: int = 0,
    time_budget_s: float = 0.0,
    record: bool = False,
    render_mode: str | None = "ansi",
    client: Client | Router | None = None,
    timeout_s: float = 600.0,
    connect_timeout_s: float = 5.0,
) -> KernelGymEnv:
    """A ``KernelGymEnv`` for ``task`` on the server at ``address`` (or through ``client``,
    which the env then leaves open on ``close()``). A list of addresses places the env on one
    of those servers (the least loaded, failing over past those that are down: ``Router``);
    pass one ``Router`` as ``client`` to share it among envs. ``max_steps=0`` and ``time_budget_s=0`` take
    the server's defaults; see ``KernelGymEnv`` for the spaces. ``timeout_s`` is how long a call waits
    for its reply (an evaluation can take minutes), ``connect_timeout_s`` how long the first call
    waits for a server to be there at all before ``TransportError`` says how to start one."""
    return KernelGymEnv(
        task,
        backend=backend,
        reward=reward,
        reward_config=reward_config,
        address=address,
        max_steps=max_steps,
        time_budget_s=time_budget_s,
        record=record,
        render_mode=render_mode,
        client=client,
        timeout_s=timeout_s,
        connect_timeout_s=connect_timeout_s,
    )


def _register() -> None:
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(
            id=ENV_ID,
            entry_point="kernelgym.env:KernelGymEnv",
            vector_entry_point="kernelgym.vector:KernelGymVectorEnv",
            nondeterministic=True,  # cannot depend on the backend here; kernelgym.make's spec does
        )


_register()
