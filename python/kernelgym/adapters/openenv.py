"""kernelgym as an OpenEnv environment (``openenv-core``): OpenEnv clients, hubs and TRL's OpenEnv
integration use a kernelgym task unchanged.

OpenEnv serves one ``Environment`` per WebSocket session (``/ws``) and stateless ``/reset`` and
``/step`` over HTTP. ``KernelGymEnvironment`` is one kernelgym episode on a kernelgym server: its
reset evaluates the task's starter, its step takes one kernelgym action and answers with the
observation, the reward and ``done`` (submitted, or a budget spent). Serve it with

    python -m kernelgym.adapters.openenv --task cpu/softmax_rows --connect tcp://127.0.0.1:5555 --port 8000

and talk to it with any OpenEnv client, e.g. ``GenericEnvClient(base_url="http://127.0.0.1:8000")``:
``reset()``, then ``step({"kind": "replace", "source": "..."})`` or ``step({"reply": model_text})``
(a model's reply, read by ``kernelgym.text.parse_action``).

The action's fields are the wire action's (docs/protocol.md): ``kind`` and the field of that kind
(``source``, ``edits``, ``diff``, ``knobs`` or the wire's own name for it ``values``, ``to_step``),
or ``reply``. An action the server
refuses (a patch that does not apply, an unknown knob value) is a step with ``status
"invalid_action"`` and the reward the server gives it, as in kernelgym itself; a reply with no
action in it is answered without a step, ``action_error`` saying why and a reward of None.

Install: ``pip install openenv-core`` (its web UI needs gradio; the adapter does not).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any, Literal

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from pydantic import Field

import kernelgym
from kernelgym.spaces import plain_value
from kernelgym.text import ActionParseError, parse_action

__all__ = ["KernelAction", "KernelObservation", "KernelState", "KernelGymEnvironment", "create_kernelgym_app", "main"]

DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"


class KernelAction(Action):
    """One kernelgym action: a wire action's kind and its field, or a model's whole reply."""

    kind: Literal["replace", "edit", "patch", "knobs", "revert", "submit"] | None = None
    source: str | None = None
    edits: list[dict[str, str]] | None = None
    diff: str | None = None
    knobs: dict[str, Any] | None = None
    values: dict[str, Any] | None = Field(default=None, description="the wire's name for `knobs`; either may be used")
    to_step: int | None = None
    reply: str | None = Field(default=None, description="a model's reply; kernelgym.text.parse_action reads the action")


class KernelObservation(Observation):
    """kernelgym's observation: the fields an LLM policy or a trainer reads, and ``info``, the
    server's info and the observation's other fields (OpenEnv does not send ``metadata``)."""

    text: str = ""
    source: str = ""
    status: str = ""
    stage: str = ""
    message: str = ""
    action_error: str = ""
    speedup: float = 0.0
    best_speedup: float = 0.0
    step: int = 0
    steps_left: int = 0
    features: list[float] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class KernelState(State):
    task: str = ""
    backend: str = ""
    env: str | None = None
    best_speedup: float = 0.0


_OBSERVATION_FIELDS = ("text", "source", "status", "stage", "message", "action_error")
_NUMBER_FIELDS = ("speedup", "best_speedup")


class KernelGymEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    """One kernelgym episode per OpenEnv session. The server env is made at the first reset and
    closed with the session (``close``)."""

    # Every session is its own server env on its own connection: nothing is shared.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: str = "cpu/softmax_rows", address: str = DEFAULT_ADDRESS, backend: str = "cpu",
                 reward: str = "log_speedup_gain", max_steps: int = 0, timeout_s: float = 600.0,
                 connect_timeout_s: float = 5.0):
        super().__init__()
        self._make = dict(task=task, backend=backend, reward=reward, address=address, max_steps=max_steps,
                          render_mode=None, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
        self._env: kernelgym.KernelGymEnv | None = None
        self._state = KernelState(task=task, backend=backend)
        self._done = False

    def _episode_env(self) -> kernelgym.KernelGymEnv:
        if self._env is None:
            self._env = kernelgym.make(**self._make)
            self._state.env = self._env.env_id
        return self._env

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> KernelObservation:
        obs, info = self._episode_env().reset(seed=seed)
        self._state.episode_id = episode_id or str(uuid.uuid4())
        self._state.step_count = 0
        self._done = False
        return self._observation(obs, info, reward=None, done=False)

    def step(self, action: KernelAction, timeout_s: float | None = None, **kwargs: Any) -> KernelObservation:
        if action.reply is not None:
            try:
                wire = parse_action(action.reply, backend=self._state.backend)
            except ActionParseError as error:
                # No step: the episode is where it was, and the model is told why.
                return KernelObservation(action_error=str(error), status="no_action", done=self._done,
                                         reward=None, step=self._state.step_count)
        else:
            wire = _wire_action(action)
        obs, reward, terminated, truncated, info = self._episode_env().step(wire)
        self._state.step_count += 1
        self._done = bool(terminated or truncated)
        return self._observation(obs, info, reward=reward, done=self._done)

    @property
    def state(self) -> KernelState:
        return self._state

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()

    def _observation(self, obs: dict[str, Any], info: dict[str, Any], *, reward: float | None,
                     done: bool) -> KernelObservation:
        fields: dict[str, Any] = {name: str(obs.get(name, "")) for name in _OBSERVATION_FIELDS}
        fields.update({name: float(obs.get(name, 0.0)) for name in _NUMBER_FIELDS})
        fields["step"], fields["steps_left"] = int(obs.get("step", 0)), int(obs.get("steps_left", 0))
        fields["features"] = [float(x) for x in obs.get("features", [])]
        self._state.best_speedup = fields["best_speedup"]
        return KernelObservation(**fields, reward=reward, done=done, info=plain_value(info))


def _wire_action(action: KernelAction) -> dict[str, Any]:
    kind = action.kind or ("replace" if action.source is not None else None)
    if kind is None:
        raise ValueError("a kernelgym action needs `kind` (replace, edit, patch, knobs, revert, submit) or `reply`")
    if action.knobs is not None and action.values is not None:
        raise ValueError("a knobs action takes `knobs` or `values` (the same map), not both")
    # this action's field -> the wire action's (docs/protocol.md: a knobs action's map is `values`)
    field, wire_field = {"replace": ("source", "source"), "edit": ("edits", "edits"), "patch": ("diff", "diff"),
                         "knobs": ("knobs", "values"), "revert": ("to_step", "to_step")}.get(kind, (None, None))
    wire: dict[str, Any] = {"kind": kind}
    if field is not None:
        value = getattr(action, field)
        if value is None and field == "knobs":
            value = action.values
        if value is None:
            raise ValueError(f"a {kind!r} action needs `{field}`" + (" (or `values`)" if field == "knobs" else ""))
        wire[wire_field] = value
    return wire


def create_kernelgym_app(task: str = "cpu/softmax_rows", address: str = DEFAULT_ADDRESS, backend: str = "cpu",
                         reward: str = "log_speedup_gain", max_steps: int = 0, max_concurrent_envs: int = 64):
    """OpenEnv's FastAPI app serving kernelgym episodes of ``task`` (``/ws``, ``/reset``, ``/step``,
    ``/state``, ``/health``, ``/schema``)."""
    return create_fastapi_app(
        lambda: KernelGymEnvironment(task=task, address=address, backend=backend, reward=reward, max_steps=max_steps),
        KernelAction, KernelObservation, max_concurrent_envs=max_concurrent_envs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a kernelgym task as an OpenEnv environment.")
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--connect", "--address", dest="address", default=DEFAULT_ADDRESS,
                        help="the kernelgym server's client endpoint")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--reward", default="log_speedup_gain")
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    import uvicorn

    app = create_kernelgym_app(args.task, args.address, args.backend, args.reward, args.max_steps)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
