"""Gymnasium spaces for kernelgym episodes, and the conversions between them and the wire.

``EnvSpaces`` is built from what the server announces (``hello``: ``feature_names``,
``action_kinds``, ``max_message_bytes``), the task (``tasks.get``: its knobs) and the env
(``env.make``: ``max_steps``). It holds the observation and action spaces and converts a wire
observation into a space member plus info, and any accepted action form into a wire action
(docs/protocol.md, "Observation" and "Actions"). ``KernelGymEnv`` and ``KernelGymVectorEnv``
share it, so the single and the batched env cannot disagree about either.

Numbers on the wire: the server's msgpack packer writes a whole-valued double as an integer
(``seconds_left: 600``, ``reward: 0``), so every numeric field is converted to its declared type
here rather than trusted to arrive as a float.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from kernelgym.trust import timing_trust

__all__ = [
    "ACTION_SAMPLE_KEYS",
    "OBSERVATION_KEYS",
    "SAMPLE_CHARSET",
    "EnvSpaces",
    "UnicodeText",
    "feature_bounds",
]

# What `sample()` draws text from: printable ASCII and whitespace. Membership is wider (below).
SAMPLE_CHARSET = string.printable


class UnicodeText(spaces.Text):
    """A ``Text`` space that contains every ``str`` of allowed length, whatever its characters.

    Kernel sources are arbitrary text: a comment in another language, a ``µs`` or a ``→``, or a
    stray character a policy wrote comes back in the observation as it was sent, and messages
    quote the source. ``Text`` keeps its charset as a frozenset (plus a list, an index and a
    string), and all of Unicode (1.1 M code points) is too large for that, all the more as
    batching deep-copies the space per sub-env. So membership accepts any character, while
    sampling draws from ``sample_charset`` (``SAMPLE_CHARSET`` by default).

    Not flattenable: ``gymnasium.spaces.flatten`` encodes a character as its index in the
    charset, which characters outside ``sample_charset`` do not have.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        sample_charset: str = SAMPLE_CHARSET,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=sample_charset, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return (
            type(other) is type(self)
            and self.min_length == other.min_length  # type: ignore[attr-defined]
            and self.max_length == other.max_length  # type: ignore[attr-defined]
            and self.character_set == other.character_set  # type: ignore[attr-defined]
        )


# ---- the feature vector ----

# The clamping of env/episode/observation.cc (FeatureSink::Add's lo/hi), by feature name. hello
# announces the names but not the bounds, so they are mirrored here; `status_*` and `stage_*` are
# one-hot. A feature this table does not know (a newer server) gets float32's finite range: the
# server never sends NaN or Inf, so that still contains every value.
_LOG_MAX = 20.0
_FEATURE_BOUNDS: dict[str, tuple[float, float]] = {
    "log_speedup": (-_LOG_MAX, _LOG_MAX),
    "log_speedup_ci_low": (-_LOG_MAX, _LOG_MAX),
    "log_speedup_ci_high": (-_LOG_MAX, _LOG_MAX),
    "log_best_speedup": (-_LOG_MAX, _LOG_MAX),
    "reused": (0.0, 1.0),
    "action_error": (0.0, 1.0),
    "log1p_compile_errors": (0.0, _LOG_MAX),
    "log1p_compile_warnings": (0.0, _LOG_MAX),
    "mismatch_fraction": (0.0, 1.0),
    "non_finite_fraction": (0.0, 1.0),
    "nondeterministic": (0.0, 1.0),
    "fraction_of_peak": (0.0, 2.0),
    "memory_bound": (0.0, 1.0),
    "log10_arithmetic_intensity": (-6.0, 6.0),
    "log10_task_flops": (0.0, _LOG_MAX),
    "log10_task_bytes": (0.0, _LOG_MAX),
    "log1p_vectorized_loops": (0.0, _LOG_MAX),
    "log1p_not_vectorized_loops": (0.0, _LOG_MAX),
    "steps_left_fraction": (0.0, 1.0),
    "seconds_left_fraction": (0.0, 1.0),
    "log1p_eval_seconds": (0.0, _LOG_MAX),
}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def feature_bounds(name: str) -> tuple[float, float]:
    """The closed interval the server clamps feature ``name`` to."""
    if name.startswith(("status_", "stage_")):
        return (0.0, 1.0)
    return _FEATURE_BOUNDS.get(name, (-_FLOAT32_MAX, _FLOAT32_MAX))


# ---- the observation ----

_TEXT_KEYS = ("text", "source", "status", "stage", "message", "action_error")
_REAL_KEYS = ("speedup", "speedup_ci_low", "speedup_ci_high", "best_speedup")
_COUNT_KEYS = ("step", "steps_left")
# The wire observation's fields that the observation space holds; every other field (`report`,
# `seconds_left`, and any a newer server adds) goes into info under its own name.
OBSERVATION_KEYS: tuple[str, ...] = (*_TEXT_KEYS, *_REAL_KEYS, *_COUNT_KEYS, "reused", "features")

# info entries that are numbers of a known type (the rest are passed as the server sent them).
_INFO_FLOATS = ("seconds_left", "eval_seconds")

# ---- the action ----

# The action kinds this client can build from a space sample, and the action-space key each reads.
ACTION_SAMPLE_KEYS: dict[str, str | None] = {
    "replace": "source",
    "edit": "edits",
    "patch": "diff",
    "knobs": "knobs",
    "revert": "to_step",
    "submit": None,
}

# A request must hold 16 edit blocks (two strings each) at 4 UTF-8 bytes per character.
_ACTION_TEXT_DIVISOR = 16 * 2 * 4


def plain_value(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays, tuples and mappings made plain (msgpack- and JSON-able)."""
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain_value(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


class EnvSpaces:
    """The observation and action spaces of one task's envs, and the wire conversions.

    Args:
        hello: the server's ``hello`` result.
        task: the task's ``tasks.get`` result (its ``spec.knobs``, when it has knobs).
        max_steps: the env's step limit (``env.make``'s result, the server default filled in).
    """

    def __init__(self, hello: Mapping[str, Any], task: Mapping[str, Any], max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        self.max_steps = int(max_steps)
        self.feature_names: tuple[str, ...] = tuple(hello["feature_names"])
        self.max_message_bytes = int(hello["max_message_bytes"])
        # Kinds the server offers and this client can fill from a sample, in hello's order; a kind
        # only a newer server knows is still usable as a wire-form dict.
        self.action_kinds: tuple[str, ...] = tuple(k for k in hello["action_kinds"] if k in ACTION_SAMPLE_KEYS)
        self.knobs: dict[str, tuple[Any, ...]] = {
            name: tuple(knob["values"]) for name, knob in sorted((task.get("knobs") or {}).items())
        }
        self.observation_space = self._observation_space()
        self.action_space = self._action_space()

    def _observation_space(self) -> spaces.Dict:
        low, high = zip(*(feature_bounds(n) for n in self.feature_names)) if self.feature_names else ((), ())
        # A string in a reply is at most what a request can carry (edits could grow a source past
        # it, at the price of replies larger than any request). One space object per key, so that
        # seeding or sampling one member never moves another.
        members: dict[str, spaces.Space[Any]] = {key: UnicodeText(self.max_message_bytes) for key in _TEXT_KEYS}
        for key in _REAL_KEYS:
            members[key] = spaces.Box(low=0.0, high=np.finfo(np.float64).max, shape=(), dtype=np.float64)
        for key in _COUNT_KEYS:
            members[key] = spaces.Discrete(self.max_steps + 1)
        members["reused"] = spaces.Discrete(2)
        members["features"] = spaces.Box(
            low=np.asarray(low, dtype=np.float32),
            high=np.asarray(high, dtype=np.float32),
            shape=(len(self.feature_names),),
            dtype=np.float32,
        )
        return spaces.Dict(members)

    def _action_space(self) -> spaces.Dict:
        chars = self.max_message_bytes // _ACTION_TEXT_DIVISOR
        members: dict[str, spaces.Space[Any]] = {
            "kind": spaces.Discrete(len(self.action_kinds)),
            "source": UnicodeText(chars),
            "edits": spaces.Sequence(
                spaces.Dict({"search": UnicodeText(chars), "replace": UnicodeText(chars)}), stack=False
            ),
            "diff": UnicodeText(chars),
            "to_step": spaces.Discrete(self.max_steps + 1),
        }
        if self.knobs:  # an empty Dict is no valid space; the `knobs` kind then sends {}
            members["knobs"] = spaces.Dict({name: spaces.Discrete(len(v)) for name, v in self.knobs.items()})
        return spaces.Dict(members)

    # ---- wire -> space ----

    def observation(
        self, wire_observation: Mapping[str, Any], wire_info: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(observation, info): the space's fields, and the server's info plus the other fields.

        The returned objects are new: nothing in them is shared with earlier calls.
        """
        o = wire_observation
        obs: dict[str, Any] = {key: str(o[key]) for key in _TEXT_KEYS}
        obs.update({key: np.array(float(o[key]), dtype=np.float64) for key in _REAL_KEYS})
        obs.update({key: np.int64(o[key]) for key in _COUNT_KEYS})
        obs["reused"] = np.int64(bool(o["reused"]))
        features = np.asarray(o["features"], dtype=np.float32)
        if features.shape != (len(self.feature_names),):
            raise ValueError(
                f"observation.features has {features.size} entries; hello announced {len(self.feature_names)}"
            )
        obs["features"] = features
        info = dict(wire_info or {})
        info.update({key: value for key, value in o.items() if key not in OBSERVATION_KEYS})
        for key in _INFO_FLOATS:
            if isinstance(info.get(key), int) and not isinstance(info[key], bool):
                info[key] = float(info[key])
        # how far this evaluation's timing can be trusted, for trainers to filter on (kernelgym.trust)
        info["timing_trust"] = timing_trust(info.get("report"))
        return obs, info

    # ---- any action form -> wire ----

    def wire_action(self, action: Any) -> dict[str, Any]:
        """The wire action (``{"kind": ..., ...}``) for ``action``, which may be:

        - a ``str``: the whole new source (``replace``);
        - a wire-form mapping, whose ``kind`` is a string: sent as it is (NumPy values made plain);
        - an action-space sample, whose ``kind`` is an index into ``action_kinds``: only the key
          of that kind is read (see ``ACTION_SAMPLE_KEYS``), the others are ignored.
        """
        if isinstance(action, str):
            return {"kind": "replace", "source": action}
        if not isinstance(action, Mapping):
            raise TypeError(
                "an action is a str (the new source), a wire-form dict or an action-space sample, "
                f"not {type(action).__name__}"
            )
        kind = action.get("kind")
        if isinstance(kind, str):
            return plain_value(action)
        if isinstance(kind, (bool, np.bool_)) or not isinstance(kind, (int, np.integer)):
            raise TypeError(f"action['kind'] must be a kind's name or its index in {self.action_kinds}, not {kind!r}")
        if not 0 <= int(kind) < len(self.action_kinds):
            raise ValueError(f"action['kind'] {int(kind)} is not an index into {self.action_kinds}")
        name = self.action_kinds[int(kind)]
        key = ACTION_SAMPLE_KEYS[name]
        if key is None:
            return {"kind": name}
        if key == "knobs":
            return {"kind": name, "values": self._knob_values(action.get("knobs") or {})}
        if key not in action:
            raise ValueError(f"a {name!r} action needs action[{key!r}]")
        value = action[key]
        if key == "edits":
            edits = [{"search": str(e["search"]), "replace": str(e["replace"])} for e in value]
            if not edits:
                raise ValueError("an 'edit' action needs at least one {search, replace} block")
            return {"kind": name, "edits": edits}
        if key == "to_step":
            return {"kind": name, "to_step": int(value)}
        return {"kind": name, key: str(value)}

    def _knob_values(self, indices: Mapping[str, Any]) -> dict[str, Any]:
        values = {}
        for name, index in indices.items():
            if name not in self.knobs:
                raise ValueError(f"unknown knob {name!r}; the task's knobs are {sorted(self.knobs)}")
            domain = self.knobs[name]
            if not 0 <= int(index) < len(domain):
                raise ValueError(f"knob {name!r}: index {int(index)} is outside its {len(domain)} values {domain}")
            values[name] = domain[int(index)]
        return values
