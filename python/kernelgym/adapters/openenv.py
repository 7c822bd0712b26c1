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
"invalid_action"`` and the reward the server gives it, as in kernelgym itself. A malformed
action (a kind without its field, an empty ``edits``) and a reply with no action in it are not
sent to the server: they are answered with ``status "invalid_action"`` or ``"no_action"``,
``action_error`` saying why, and the reward's minimum (``env_info["reward_min"]``), as the TRL and
verifiers adapters pay a reply with no action; the episode is where it was (docs/python.md, "One
episode contract").

Install: ``pip install openenv-core`` (its web UI needs gradio; the adapter does not).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any, Literal

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from pydantic import Field
from starlette.websockets import WebSocketDisconnect

import kernelgym
from kernelgym.errors import BadRequest
from kernelgym.protocol import encode_action
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
        env = self._episode_env()
        if action.reply is not None:
            try:
                wire = parse_action(action.reply, backend=self._state.backend)
            except ActionParseError as error:
                return self._refused("no_action", str(error), env)
        else:
            try:
                wire = encode_action(_wire_action(action))
            except (TypeError, ValueError) as error:
                return self._refused("invalid_action", str(error), env)
        try:
            obs, reward, terminated, truncated, info = env.step(wire)
        except BadRequest as error:  # malformed in a way only the server checks (an empty edits list)
            return self._refused("invalid_action", error.message, env)
        self._state.step_count += 1
        self._done = bool(terminated or truncated)
        return self._observation(obs, info, reward=reward, done=self._done)

    def _refused(self, status: str, why: str, env: kernelgym.KernelGymEnv) -> KernelObservation:
        """No step: the episode is where it was; the model is told why and paid the least."""
        return KernelObservation(action_error=why, status=status, done=self._done,
                                 reward=float(env.env_info["reward_min"]), step=self._state.step_count,
                                 best_speedup=self._state.best_speedup)

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


class _PeerClosedIsNotAnError:
    """ASGI middleware: a WebSocket session whose client closed first ends quietly. OpenEnv's
    endpoint (openenv-core 0.3) closes the socket again in its ``finally``, which raises
    ``WebSocketDisconnect`` once the peer is gone, and uvicorn logged that as an ERROR with a
    60-line traceback at every disconnect, clean ones included."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            pass  # the session was closed and destroyed already; only the second close failed


def create_kernelgym_app(task: str = "cpu/softmax_rows", address: str = DEFAULT_ADDRESS, backend: str = "cpu",
                         reward: str = "log_speedup_gain", max_steps: int = 0, max_concurrent_envs: int = 64):
    """OpenEnv's FastAPI app serving kernelgym episodes of ``task`` (``/ws``, ``/reset``, ``/step``,
    ``/state``, ``/health``, ``/schema``)."""
    app = create_fastapi_app(
        lambda: KernelGymEnvironment(task=task, address=address, backend=backend, reward=reward, max_steps=max_steps),
        KernelAction, KernelObservation, max_concurrent_envs=max_concurrent_envs)
    app.add_middleware(_PeerClosedIsNotAnError)
    return app


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
