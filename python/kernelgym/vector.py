"""Many kernelgym episodes as one ``gymnasium.vector.VectorEnv``, stepped concurrently through
one connection.

A step sends every sub-env's request at once (the server evaluates them in parallel, on as many
runners as it has) and then collects the replies, matched by request id, in whatever order they
come back. The batch semantics are Gymnasium's, matching ``SyncVectorEnv`` over ``KernelGymEnv``
instances for the same seeds and actions (python/tests/test_vector.py compares them step by step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from kernelgym.client import Client
from kernelgym.env import DEFAULT_ADDRESS, server_seed
from kernelgym.errors import ProtocolError, ServerError, TransportError, UnknownEnv
from kernelgym.protocol import encode_action
from kernelgym.spaces import EnvSpaces

__all__ = ["KernelGymVectorEnv", "make_vec"]


class KernelGymVectorEnv(VectorEnv[dict[str, Any], Any, np.ndarray]):
    """``num_envs`` server envs of one task, reset and stepped together over one ``Client``.

    Spaces: ``single_observation_space`` / ``single_action_space`` are ``KernelGymEnv``'s (see
    its docstring); ``observation_space`` / ``action_space`` are their batches
    (``gymnasium.vector.utils.batch_space``): text members become tuples of ``num_envs``
    strings, ``features`` a ``(num_envs, len(feature_names))`` float32 array, scalars arrays of
    shape ``(num_envs,)``, ``edits`` a tuple of per-env sequences.

    ``step(actions)`` takes the batched form (a dict as ``action_space.sample()`` returns) or a
    sequence of ``num_envs`` per-env actions, each in any form ``KernelGymEnv.step`` takes (a
    sample, a wire-form dict, a str). Infos follow the vector-env convention (``info[key]`` an
    array over sub-envs, ``info["_key"]`` the mask of sub-envs that have it).

    Autoreset (``autoreset_mode``, also ``metadata["autoreset_mode"]``), as Gymnasium documents it:

    - ``NEXT_STEP`` (default): a sub-env that terminated or truncated is reset by the next
      ``step``, which ignores its action and returns the reset's observation and info, reward 0,
      terminated and truncated False.
    - ``SAME_STEP``: a sub-env that ends is reset within the same ``step``; the returned
      observation and info are the reset's, the last step's are in ``info["final_obs"]`` and
      ``info["final_info"]`` (masks ``_final_obs`` / ``_final_info``).
    - ``DISABLED``: nothing is reset; ``reset(options={"reset_mask": mask})`` resets the
      sub-envs where ``mask`` (a bool array of shape ``(num_envs,)``) is True. Stepping while a
      sub-env has ended raises RuntimeError before anything is sent.

    Seeds: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` (a list gives each its own), and
    each sub-env draws the seeds of its later resets (autoresets included) from its own generator
    (``np_random``), exactly as a ``KernelGymEnv`` does.

    An error reply for any sub-env (or no reply within the client's timeout) raises once every
    other reply is in; the batch is then inconsistent and needs ``reset()``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        task: str,
        num_envs: int,
        backend: str = "cpu",
        reward: str = "log_speedup_gain",
        reward_config: Mapping[str, Any] | None = None,
        address: str = DEFAULT_ADDRESS,
        max_steps: int = 0,
        time_budget_s: float = 0.0,
        record: bool = False,
        render_mode: str | None = "ansi",
        client: Client | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']} or None")
        self.num_envs = int(num_envs)
        self.render_mode = render_mode
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self._owns_client = client is None
        self._client: Client | None = Client(address) if client is None else client
        self._envs: list[str] = []
        self._abandoned: set[int] = set()  # requests whose reply did not come in time
        try:
            self.hello: dict[str, Any] = self._client.hello()
            self.task_info: dict[str, Any] = self._client.get_task(task)
            made = self._gather(
                [
                    self._client.send(
                        "env.make",
                        task=task,
                        backend=backend,
                        reward=reward,
                        reward_config=dict(reward_config or {}),
                        max_steps=max_steps,
                        time_budget_s=time_budget_s,
                        record=record,
                    )
                    for _ in range(self.num_envs)
                ],
                close_made=True,
            )
        except BaseException:
            self.close()
            raise
        self.env_infos: list[dict[str, Any]] = made
        self._envs = [m["env"] for m in made]
        self.spaces = EnvSpaces(self.hello, self.task_info, made[0]["max_steps"])
        self.single_observation_space = self.spaces.observation_space
        self.single_action_space = self.spaces.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._rngs: list[np.random.Generator | None] = [None] * self.num_envs
        self._rng_seeds: list[int | None] = [None] * self.num_envs
        self._env_obs: list[dict[str, Any] | None] = [None] * self.num_envs
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)
        self._started = False

    # ---- seeds, as KernelGymEnv.reset (gymnasium.Env.reset + np_random) does per sub-env ----

    def _rng(self, i: int) -> np.random.Generator:
        if self._rngs[i] is None:
            self._rngs[i], self._rng_seeds[i] = seeding.np_random()
        return self._rngs[i]  # type: ignore[return-value]

    def _reset_seed(self, i: int, seed: int | None) -> int:
        if seed is not None:
            self._rngs[i], self._rng_seeds[i] = seeding.np_random(seed)
        return server_seed(seed, self._rng(i))

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each sub-env's generator (it draws that sub-env's reset seeds)."""
        return tuple(self._rng(i) for i in range(self.num_envs))

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        for i in range(self.num_envs):
            self._rng(i)  # seeds the generators not seeded yet
        return tuple(self._rng_seeds)  # type: ignore[arg-type]

    @property
    def client(self) -> Client:
        if self._client is None:
            raise gymnasium.error.ClosedEnvironmentError("the vector env is closed")
        return self._client

    @property
    def env_ids(self) -> tuple[str, ...]:
        """The server's ids of the sub-envs, in order."""
        return tuple(self._envs)

    # ---- pipelining ----

    def _gather(self, ids: Sequence[int], close_made: bool = False) -> list[dict[str, Any]]:
        """The results of the requests ``ids``, in that order; every reply is awaited before the
        first error (by position) is raised. ``close_made``: on an error, close the envs that the
        successful ``env.make`` replies made."""
        client = self.client
        position = {request_id: i for i, request_id in enumerate(ids)}
        results: list[dict[str, Any] | None] = [None] * len(ids)
        errors: list[BaseException | None] = [None] * len(ids)
        while position:
            reply = client.recv(client.timeout_s)
            if reply is None:
                self._abandoned.update(position)
                raise TransportError(
                    f"no reply to {len(position)} of {len(ids)} requests within {client.timeout_s} s; "
                    "close this vector env"
                )
            if reply.id in self._abandoned:
                self._abandoned.discard(reply.id)
                continue
            i = position.pop(reply.id, None)
            if i is None:
                raise RuntimeError(
                    f"reply {reply.id} answers a request this vector env did not send: its client must "
                    "not have other pipelined requests outstanding while the vector env uses it"
                )
            try:
                results[i] = reply.unwrap()
            except (ServerError, ProtocolError) as e:  # raised below, once every reply is in
                errors[i] = e
        first_error = next((e for e in errors if e is not None), None)
        if first_error is not None:
            if close_made:
                self._close_envs([r["env"] for r in results if r is not None])
            raise first_error
        return results  # type: ignore[return-value]

    def _send_resets(self, seeds: dict[int, int]) -> list[int]:
        return [self.client.send("env.reset", env=self._envs[i], seed=seed) for i, seed in seeds.items()]

    # ---- the VectorEnv API ----

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Resets every sub-env, or those of ``options["reset_mask"]``; see the class for seeds."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"a list of seeds must have num_envs={self.num_envs} entries, not {len(seeds)}")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"KernelGymVectorEnv.reset takes only the option 'reset_mask', got {sorted(options)}")
        if mask is None:
            mask = np.ones(self.num_envs, dtype=np.bool_)
        else:
            _check_reset_mask(mask, self.num_envs)
        if not self._started and not mask.all():
            raise RuntimeError("the first reset() must reset every sub-env (no reset_mask)")

        chosen = [i for i in range(self.num_envs) if mask[i]]
        results = self._gather(self._send_resets({i: self._reset_seed(i, seeds[i]) for i in chosen}))
        infos: dict[str, Any] = {}
        for i, result in zip(chosen, results):
            self._env_obs[i], info = self.spaces.observation(result["observation"], result["info"])
            infos = self._add_info(infos, info, i)
        self._autoreset_envs[mask] = False
        self._started = True
        return self._batched_observations(), infos

    def step(self, actions: Any) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every sub-env, sent together; autoreset as ``autoreset_mode`` says."""
        if not self._started:
            raise gymnasium.error.ResetNeeded("step() before reset()")
        per_env = self._split_actions(actions)
        if self.autoreset_mode == AutoresetMode.DISABLED and self._autoreset_envs.any():
            ended = np.flatnonzero(self._autoreset_envs).tolist()
            raise RuntimeError(
                f"sub-envs {ended} have terminated or truncated; with AutoresetMode.DISABLED reset them "
                "first: reset(options={'reset_mask': mask})"
            )
        resetting = self._autoreset_envs & (self.autoreset_mode == AutoresetMode.NEXT_STEP)
        stepping = [i for i in range(self.num_envs) if not resetting[i]]
        # Every action is converted before anything is sent, so that a bad one sends nothing.
        wire = {i: encode_action(self.spaces.wire_action(per_env[i])) for i in stepping}
        resets = {i: server_seed(None, self._rng(i)) for i in range(self.num_envs) if resetting[i]}

        ids = [self.client.send("env.step", env=self._envs[i], action=wire[i]) for i in stepping]
        ids += self._send_resets(resets)
        replies = dict(zip([*stepping, *resets], self._gather(ids)))

        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        env_infos: list[dict[str, Any]] = [{}] * self.num_envs
        for i in range(self.num_envs):
            result = replies[i]
            self._env_obs[i], env_infos[i] = self.spaces.observation(result["observation"], result["info"])
            if not resetting[i]:
                rewards[i] = float(result["reward"])
                terminations[i] = bool(result["terminated"])
                truncations[i] = bool(result["truncated"])

        final: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            ended = [i for i in range(self.num_envs) if terminations[i] or truncations[i]]
            if ended:
                seeds = {i: server_seed(None, self._rng(i)) for i in ended}
                for i, result in zip(ended, self._gather(self._send_resets(seeds))):
                    final[i] = (self._env_obs[i], env_infos[i])  # type: ignore[assignment]
                    self._env_obs[i], env_infos[i] = self.spaces.observation(result["observation"], result["info"])

        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            if i in final:
                infos = self._add_info(infos, {"final_obs": final[i][0], "final_info": final[i][1]}, i)
            infos = self._add_info(infos, env_infos[i], i)

        self._autoreset_envs = np.logical_or(terminations, truncations)
        return self._batched_observations(), rewards, terminations.copy(), truncations.copy(), infos

    def _split_actions(self, actions: Any) -> list[Any]:
        if isinstance(actions, Mapping):
            per_env = list(iterate(self.action_space, actions))
        elif isinstance(actions, (str, bytes)):
            raise TypeError("step() takes one action per sub-env (a batched dict or a sequence), not one str")
        else:
            per_env = list(actions)
        if len(per_env) != self.num_envs:
            raise ValueError(f"step() needs num_envs={self.num_envs} actions, got {len(per_env)}")
        return per_env

    def _batched_observations(self) -> dict[str, Any]:
        # A new output every time, so nothing returned is shared with an earlier call.
        out = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        return concatenate(self.single_observation_space, self._env_obs, out)

    def render(self) -> tuple[str, ...] | None:
        """Each sub-env's last observation's Markdown ``text``."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() without a render_mode: make the env with render_mode='ansi'")
            return None
        if not self._started:
            raise gymnasium.error.ResetNeeded("render() before reset(): there is no observation yet")
        return tuple(obs["text"] for obs in self._env_obs)  # type: ignore[index]

    def _close_envs(self, envs: Sequence[str]) -> None:
        """Closes ``envs`` on the server; an env already gone, or a server that no longer
        answers, is not an error here."""
        client = self._client
        if client is None or not envs:
            return
        pending = {client.send("env.close", env=env) for env in envs}
        first_error: BaseException | None = None
        while pending:
            reply = client.recv(client.timeout_s)
            if reply is None:
                return
            if reply.id in pending:
                pending.discard(reply.id)
                if not reply.ok and not isinstance(reply.error, UnknownEnv) and first_error is None:
                    first_error = reply.error
        if first_error is not None:
            raise first_error

    def close_extras(self, **kwargs: Any) -> None:
        """Closes every server env, and the connection when this vector env made it."""
        envs, self._envs = self._envs, []
        try:
            self._close_envs(envs)
        finally:
            if self._client is not None and self._owns_client:
                self._client.close()
            self._client = None


def _check_reset_mask(mask: Any, num_envs: int) -> None:
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"options['reset_mask'] must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must have shape ({num_envs},), got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"options['reset_mask'] must have dtype np.bool_, got {mask.dtype}")
    if not mask.any():
        raise ValueError(f"options['reset_mask'] must have at least one True value, got {mask}")


def make_vec(
    task: str,
    num_envs: int,
    backend: str = "cpu",
    reward: str = "log_speedup_gain",
    reward_config: Mapping[str, Any] | None = None,
    address: str = DEFAULT_ADDRESS,
    max_steps: int = 0,
    time_budget_s: float = 0.0,
    record: bool = False,
    render_mode: str | None = "ansi",
    client: Client | None = None,
    autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
) -> KernelGymVectorEnv:
    """``num_envs`` envs of ``task`` batched over one connection; see ``KernelGymVectorEnv``."""
    return KernelGymVectorEnv(
        task,
        num_envs,
        backend=backend,
        reward=reward,
        reward_config=reward_config,
        address=address,
        max_steps=max_steps,
        time_budget_s=time_budget_s,
        record=record,
        render_mode=render_mode,
        client=client,
        autoreset_mode=autoreset_mode,
    )
