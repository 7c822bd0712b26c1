"""The client protocol's wire format (docs/protocol.md): requests to bytes, bytes to replies.

The only module of the package that sees msgpack. Requests are encoded canonically, byte for
byte as the C++ codec (env/protocol/codec.cc) encodes the same values: the envelope ``v, id, op``,
then every field of the op in the order of docs/protocol.md's table, defaults filled in; maps
inside (``reward_config``, ``meta``, knob values) with their keys sorted; integers in their shortest form;
floating-point numbers as float64 unless they hold an integer: msgpack-c packs a double such as
2.0 as the integer 2 (``packer::pack_double``), so ``2.0`` goes out as ``2``, and a number in a
reply may arrive as an int. The golden fixtures (tests/fixtures/protocol/) pin this down.

Replies are read as strictly as the C++ ``DecodeReply`` + ``DecodeResultTree``: one msgpack map
with string keys, each key once, no binary or extension values, nesting at most 32 deep, only the
envelope's known fields. ``check_result`` reads a result like the C++ ``...FromWire``: strict
about the fields it knows, silent about fields it does not (a newer server may add some).

Types are checked here, ranges are the server's: ``max_steps=-1`` is sent as it is and answered
with BAD_REQUEST, so that the rules live in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from kernelgym.errors import ERRORS_BY_CODE, ProtocolError, ServerError, server_error

VERSION = 1
MAX_MESSAGE_BYTES = 8 << 20
MAX_DEPTH = 32

OPS = (
    "hello", "tasks.list", "tasks.get", "env.make", "env.reset", "env.step", "env.fork", "env.close", "stats", "health"
)  # fmt: skip
# The ops a sync call sends again after a timeout: sending them twice cannot do anything twice.
IDEMPOTENT_OPS = frozenset({"hello", "tasks.list", "tasks.get", "stats", "health"})
ACTION_KINDS = ("replace", "edit", "patch", "knobs", "revert", "submit")

REQUIRED = object()  # a field without a default

# Each op's fields with their defaults, in the order the C++ encoder writes them (PackBody).
REQUEST_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "hello": (),
    "tasks.list": (("suite", ""),),
    "tasks.get": (("task", REQUIRED),),
    "env.make": (
        ("task", REQUIRED),
        ("backend", "cpu"),
        ("reward", "log_speedup_gain"),
        ("reward_config", {}),
        ("max_steps", 0),
        ("time_budget_s", 0),  # the double 0.0, as msgpack-c packs it
        ("record", False),
    ),
    "env.reset": (("env", REQUIRED), ("seed", None)),
    "env.step": (("env", REQUIRED), ("action", REQUIRED), ("meta", {})),
    "env.fork": (("env", REQUIRED),),
    "env.close": (("env", REQUIRED),),
    "stats": (),
    "health": (),
}


# ---------------------------------------------------------------------------------------------
# Requests


def _type_name(value: Any) -> str:
    """How the C++ codec names a wire type ("an integer", "a map", ...), for messages."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "a map"
    return type(value).__name__


def _want(where: str, want: str, value: Any) -> TypeError:
    return TypeError(f"{where} must be {want}, not {_type_name(value)}")


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _want(where, "a string", value)
    return value


def _integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _want(where, "an integer", value)
    return int(value)


def _wire_float(x: float) -> int | float:
    """A double as msgpack-c packs it: an integral value in [-2^63, 2^64) as that integer (-0.0
    as 0), anything else (fractions, infinities, NaN) as float64."""
    if x.is_integer() and -(2.0**63) <= x < 2.0**64:
        return int(x)
    return x


def _number(value: Any, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _want(where, "a number", value)
    return _wire_float(float(value))


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _want(where, "a boolean", value)
    return value


def _tree(value: Any, where: str) -> Any:
    """A JSON-like value in canonical form: maps with their keys sorted (str order is UTF-8 byte
    order), tuples as arrays, int and float subclasses (numpy scalars, enums) as plain ones."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _wire_float(float(value))
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{where} has a key that is {_type_name(key)}, not a string")
        return {key: _tree(value[key], f"{where}.{key}") for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_tree(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(f"{where} must be nil, a boolean, a number, a string, an array or a map, not {_type_name(value)}")


def _edit_block(block: Any, where: str) -> dict[str, str]:
    if isinstance(block, Mapping):
        unknown = sorted(set(block) - {"search", "replace"})
        if unknown:
            raise TypeError(f"{where} has an unknown field '{unknown[0]}'")
        if "search" not in block or "replace" not in block:
            raise TypeError(f"{where} needs the fields 'search' and 'replace'")
        search, replace = block["search"], block["replace"]
    elif isinstance(block, (list, tuple)) and len(block) == 2:
        search, replace = block
    else:
        raise TypeError(f"{where} must be a map {{search, replace}} or a (search, replace) pair")
    return {"search": _string(search, f"{where}.search"), "replace": _string(replace, f"{where}.replace")}


def _knob(value: Any, where: str) -> int | float | str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _want(where, "an integer, a float or a string", value)
    return int(value) if isinstance(value, int) else _wire_float(float(value))


# kind -> its fields (in wire order, after `kind`) and how each is checked.
_ACTION_FIELDS = {
    "replace": ("source",),
    "edit": ("edits",),
    "patch": ("diff",),
    "knobs": ("values",),
    "revert": ("to_step",),
    "submit": (),
}


def encode_action(action: Mapping[str, Any]) -> dict[str, Any]:
    """An ``env.step`` action (a map with ``kind`` and that kind's fields, docs/protocol.md) in
    canonical form. Raises TypeError / ValueError for an action that is not one (an unknown kind,
    a missing, unknown or wrongly typed field); whether it applies to the source is the server's
    business (an invalid_action observation)."""
    if not isinstance(action, Mapping):
        raise _want("action", "a map", action)
    kind = action.get("kind")
    if kind not in _ACTION_FIELDS:
        raise ValueError(f"unknown action kind {kind!r} ({', '.join(ACTION_KINDS)})")
    fields = _ACTION_FIELDS[kind]
    for key in action:
        if key != "kind" and key not in fields:
            raise TypeError(f"action '{kind}' has an unknown field {key!r} (fields: {', '.join(fields) or 'none'})")
    for key in fields:
        if key not in action:
            raise TypeError(f"action '{kind}' needs the field '{key}'")
    where = f"action.{fields[0]}" if fields else "action"
    if kind == "replace":
        return {"kind": kind, "source": _string(action["source"], where)}
    if kind == "patch":
        return {"kind": kind, "diff": _string(action["diff"], where)}
    if kind == "edit":
        edits = action["edits"]
        if isinstance(edits, (str, bytes)) or not isinstance(edits, Sequence):
            raise _want(where, "an array", edits)
        return {"kind": kind, "edits": [_edit_block(b, f"{where}[{i}]") for i, b in enumerate(edits)]}
    if kind == "knobs":
        values = action["values"]
        if not isinstance(values, Mapping):
            raise _want(where, "a map", values)
        for name in values:
            if not isinstance(name, str):
                raise TypeError(f"{where} has a key that is {_type_name(name)}, not a string")
        return {"kind": kind, "values": {name: _knob(values[name], f"{where}.{name}") for name in sorted(values)}}
    if kind == "revert":
        return {"kind": kind, "to_step": _integer(action["to_step"], where)}
    return {"kind": kind}


def replace(source: str) -> dict[str, Any]:
    """The action that makes ``source`` the whole kernel."""
    return {"kind": "replace", "source": source}


def edit(*blocks: Mapping[str, str] | tuple[str, str]) -> dict[str, Any]:
    """Search/replace blocks, each ``{"search": ..., "replace": ...}`` or a ``(search, replace)``
    pair; each search must match the current source exactly once."""
    return {"kind": "edit", "edits": list(blocks)}


def patch(diff: str) -> dict[str, Any]:
    """A unified diff against the current source."""
    return {"kind": "patch", "diff": diff}


def knobs(values: Mapping[str, float | str] | None = None, **named: float | str) -> dict[str, Any]:
    """Template parameters: ``knobs(tile=64, order="ikj")`` or ``knobs({"tile": 64})``."""
    return {"kind": "knobs", "values": {**(values or {}), **named}}


def revert(to_step: int) -> dict[str, Any]:
    """Make the source of step ``to_step`` current again."""
    return {"kind": "revert", "to_step": to_step}


def submit() -> dict[str, Any]:
    """The final, stricter evaluation; ends the episode."""
    return {"kind": "submit"}


# Per field: how its value is checked and put in canonical form.
_FIELD_CHECKS = {
    "suite": _string,
    "task": _string,
    "backend": _string,
    "reward": _string,
    "env": _string,
    "reward_config": lambda value, where: _map_field(value, where),
    "meta": lambda value, where: _map_field(value, where),
    "max_steps": _integer,
    "time_budget_s": _number,
    "record": _boolean,
    "seed": lambda value, where: None if value is None else _integer(value, where),
    "action": lambda value, where: encode_action(value),
}


def _map_field(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _want(where, "a map", value)
    return _tree(value, where)


_FIELD_NAMES = {op: frozenset(name for name, _ in spec) for op, spec in REQUEST_FIELDS.items()}


def request_fields(op: str, **fields: Any) -> dict[str, Any]:
    """The op's fields, checked, in canonical form and order, defaults filled in."""
    spec = REQUEST_FIELDS.get(op)
    if spec is None:
        raise ValueError(f"unknown op {op!r} ({', '.join(OPS)})")
    if not _FIELD_NAMES[op].issuperset(fields):
        unknown = min(set(fields) - _FIELD_NAMES[op])
        raise TypeError(f"{op} has an unknown field '{unknown}' (fields: {', '.join(n for n, _ in spec) or 'none'})")
    out: dict[str, Any] = {}
    for name, default in spec:
        if name in fields:
            out[name] = _FIELD_CHECKS[name](fields[name], f"{op}: field '{name}'")
        elif default is REQUIRED:
            raise TypeError(f"{op} needs the field '{name}'")
        else:
            out[name] = dict(default) if type(default) is dict else default  # never the shared default
    return out


def encode_request(request_id: int, op: str, **fields: Any) -> bytes:
    """One request's canonical bytes: ``{"v": 1, "id": request_id, "op": op, <fields>}``.

    Raises ValueError for an unknown op or a request over the protocol's size limit (which the
    server would refuse, or past 64 MiB answer by closing the connection), TypeError for a missing,
    unknown or wrongly typed field.
    """
    if isinstance(request_id, bool) or not isinstance(request_id, int) or not 0 <= request_id < 1 << 64:
        raise ValueError(f"request id must be an integer in [0, 2^64), not {request_id!r}")
    message: dict[str, Any] = {"v": VERSION, "id": request_id, "op": op}
    message.update(request_fields(op, **fields))
    data = msgpack.packb(message, use_bin_type=True)
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(
            f"the {op} request is {len(data)} bytes, over the protocol's {MAX_MESSAGE_BYTES}-byte limit; nothing was sent"
        )
    return data


# ---------------------------------------------------------------------------------------------
# Replies


@dataclass(slots=True)
class Reply:
    """One reply. ``result`` is the op's result map when ``ok``; ``error`` the typed error
    (not raised) when not. ``op`` is the op of the request it answers, when the client knows it."""

    id: int
    ok: bool
    result: dict[str, Any] | None = None
    error: ServerError | None = None
    op: str = ""

    def unwrap(self) -> dict[str, Any]:
        """The result, read like the C++ client's As...Result: raises the ServerError of an error
        reply, ProtocolError when the result lacks a field the op's format requires."""
        if not self.ok:
            assert self.error is not None
            raise self.error
        assert self.result is not None
        check_result(self.op, self.result, self.id)
        return self.result


class _Malformed(Exception):
    """A problem inside decode_reply; becomes a ProtocolError naming the reply's id."""


def _checked_map(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    """msgpack's map hook: string keys, each once (msgpack itself would keep the last silently).
    Runs for every map of every reply, so the common case stays in C: dict() and join()."""
    try:
        d = dict(pairs)
        "".join(d)  # a TypeError unless every key is a str
        if len(d) == len(pairs):
            return d
    except TypeError:
        pass
    seen: set[Any] = set()
    for key, _ in pairs:
        if type(key) is not str:
            raise _Malformed(f"a map has a key that is {_type_name(key)}, not a string")
        if key in seen:
            raise _Malformed(f"a map has the key '{key}' twice")
        seen.add(key)
    raise AssertionError("unreachable: a map with string keys, each once, was refused")


_SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, list})
_ALLOWED = _SCALARS | _CONTAINERS


def _check_tree(root: dict[str, Any] | list[Any]) -> None:
    """Only nil, booleans, numbers, strings, arrays and maps (no binary, no extension types), and
    containers nested at most MAX_DEPTH deep (the C++ unpack limits). The types of a container's
    children are collected in C (set(map(type, ...))), so a leaf costs next to nothing."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if type(node) is dict else node
        kinds = set(map(type, children))
        if kinds <= _SCALARS:
            continue
        if not kinds <= _ALLOWED:
            odd = next(c for c in children if type(c) not in _ALLOWED)
            raise _Malformed(
                f"a reply may not hold {_type_name(odd)} (only nil, booleans, numbers, strings, arrays, maps)"
            )
        if depth >= MAX_DEPTH:
            raise _Malformed(f"nested more than {MAX_DEPTH} deep")
        stack.extend((c, depth + 1) for c in children if type(c) in _CONTAINERS)


# The C++ unpack limits (env/protocol/msgpack_tree.cc, kUnpackLimits); depth is _check_tree's.
_UNPACK_OPTIONS: dict[str, Any] = {
    "raw": False,
    "strict_map_key": False,  # _checked_map says which key is wrong
    "object_pairs_hook": _checked_map,
    "max_str_len": MAX_MESSAGE_BYTES,
    "max_bin_len": MAX_MESSAGE_BYTES,
    "max_array_len": 1 << 16,
    "max_map_len": 1 << 12,
    "max_ext_len": 0,
}

_ENVELOPE_OK = frozenset({"v", "id", "ok", "result"})
_ENVELOPE_ERROR = frozenset({"v", "id", "ok", "error"})


def decode_reply(data: bytes) -> Reply:
    """One reply's bytes -> Reply. Raises ProtocolError for bytes that are not a valid reply:
    "reply 9 is malformed: <why>" with id 9, or "reply is malformed: <why>" with id 0 when the id
    could not be read."""
    reply_id = 0
    try:
        try:
            message = msgpack.unpackb(data, **_UNPACK_OPTIONS)
        except _Malformed:
            raise
        except Exception as e:  # noqa: BLE001 - msgpack's many exception types all mean "not a reply"
            raise _Malformed(f"not a valid msgpack reply: {e}") from None
        if type(message) is not dict:
            raise _Malformed(f"must be a map, not {_type_name(message)}")
        rid = message.get("id")
        if type(rid) is int and rid >= 0:
            reply_id = rid  # read first, so that a reply wrong further on still names its request
        _check_tree(message)
        v = message.get("v")
        if type(v) is not int:
            raise _Malformed(
                "needs the field 'v'"
                if v is None and "v" not in message
                else f"field 'v' must be an integer, not {_type_name(v)}"
            )
        if v != VERSION:
            raise _Malformed(f"unsupported protocol version {v}")
        if "id" not in message:
            raise _Malformed("needs the field 'id'")
        if type(rid) is not int or rid < 0:
            raise _Malformed(f"field 'id' must be a non-negative integer, not {_type_name(rid)}")
        ok = message.get("ok", False)
        if type(ok) is not bool:
            raise _Malformed(f"field 'ok' must be a boolean, not {_type_name(ok)}")
        known = _ENVELOPE_OK if ok else _ENVELOPE_ERROR
        if len(message) > 3 and not known.issuperset(message):
            raise _Malformed(f"has an unknown field '{min(set(message) - known)}'")
        if ok:
            if "result" not in message:
                raise _Malformed("needs the field 'result'")
            result = message["result"]
            if type(result) is not dict:
                raise _Malformed(f"result: must be a map, not {_type_name(result)}")
            return Reply(reply_id, True, result)
        return Reply(reply_id, False, None, _decode_error(message))
    except _Malformed as problem:
        where = f"reply {reply_id}" if reply_id else "reply"
        raise ProtocolError(f"{where} is malformed: {problem}", reply_id) from None


def _decode_error(message: dict[str, Any]) -> ServerError:
    if "error" not in message:
        raise _Malformed("needs the field 'error'")
    error = message["error"]
    if type(error) is not dict:
        raise _Malformed(f"field 'error' must be a map, not {_type_name(error)}")
    for key, want in (("code", "a string"), ("message", "a string")):
        if key not in error:
            raise _Malformed(f"error: needs the field '{key}'")
        if type(error[key]) is not str:
            raise _Malformed(f"error: field '{key}' must be {want}, not {_type_name(error[key])}")
    code = error["code"]
    if code not in ERRORS_BY_CODE:
        raise _Malformed(f"error: unknown error code '{code}'")
    details = error.get("details", {})
    if "details" in error:
        if type(details) is not dict:
            raise _Malformed(f"error.details: must be a map, not {_type_name(details)}")
        for key in sorted(details):
            if type(details[key]) is not str:
                raise _Malformed(f"error.details: field '{key}' must be a string, not {_type_name(details[key])}")
    unknown = set(error) - {"code", "message", "details"}
    if unknown:
        raise _Malformed(f"error: has an unknown field '{min(unknown)}'")
    return server_error(code, error["message"], details)


# ---------------------------------------------------------------------------------------------
# Results: the known fields of the typed ones (env/protocol/results.cc, ...FromWire)


class _BadField(Exception):
    pass


def _path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _require(m: dict[str, Any], path: str, key: str) -> Any:
    try:
        return m[key]
    except KeyError:
        raise _BadField(f"missing field '{_path(path, key)}'") from None


def _wrong(path: str, key: str, want: str, got: Any) -> _BadField:
    return _BadField(f"field '{_path(path, key)}' must be {want}, not {_type_name(got)}")


def _check_map(value: Any, path: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _BadField(("the result" if not path else f"field '{path}'") + f" must be a map, not {_type_name(value)}")
    return value


_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class _Kind:
    """What a known result field must be: its value's types, and for arrays their items' types.
    The common case (right type) is one set lookup; the slow path only words the problem."""

    types: frozenset[type]
    want: str
    items: frozenset[type] | None = None
    item_want: str = ""


_STRING = _Kind(frozenset({str}), "a string")
_NUMBER = _Kind(frozenset({int, float}), "a number")
_INT = _Kind(frozenset({int}), "an integer")  # and <= INT64_MAX
_UNSIGNED = _Kind(frozenset({int}), "a non-negative integer")  # and >= 0
_BOOL = _Kind(frozenset({bool}), "a boolean")
_MAP = _Kind(frozenset({dict}), "a map")
_MAP_OR_NIL = _Kind(frozenset({dict, type(None)}), "a map")
_STRINGS = _Kind(frozenset({list}), "an array", frozenset({str}), "a string")
_NUMBERS = _Kind(frozenset({list}), "an array", frozenset({int, float}), "a number")
_MAPS = _Kind(frozenset({list}), "an array", frozenset({dict}), "a map")


def _check_fields(m: dict[str, Any], path: str, fields: tuple[tuple[str, _Kind], ...]) -> None:
    for key, kind in fields:
        value = _require(m, path, key)
        if type(value) not in kind.types:
            raise _wrong(path, key, kind.want, value)
        if kind.items is not None and not set(map(type, value)) <= kind.items:
            i, item = next((i, item) for i, item in enumerate(value) if type(item) not in kind.items)
            raise _wrong(path, f"{key}[{i}]", kind.item_want, item)
        if kind is _INT and value > _INT64_MAX:
            raise _BadField(f"field '{_path(path, key)}' is out of range")
        if kind is _UNSIGNED and value < 0:
            raise _wrong(path, key, kind.want, value)


_HELLO = (
    ("protocol", _INT),
    ("server", _STRING),
    ("backends", _STRINGS),
    ("backend_info", _MAPS),
    ("rewards", _STRINGS),
    ("action_kinds", _STRINGS),
    ("feature_names", _STRINGS),
    ("default_max_steps", _INT),
    ("default_time_budget_s", _NUMBER),
    ("max_message_bytes", _UNSIGNED),
)
_ENV_INFO = (
    ("env", _STRING),
    ("task", _STRING),
    ("backend", _STRING),
    ("reward", _STRING),
    ("reward_min", _NUMBER),
    ("reward_max", _NUMBER),
    ("max_steps", _INT),
    ("time_budget_s", _NUMBER),
    ("record", _BOOL),
)
_OBSERVATION = (
    ("step", _INT),
    ("status", _STRING),
    ("stage", _STRING),
    ("message", _STRING),
    ("action_error", _STRING),
    ("reused", _BOOL),
    ("speedup", _NUMBER),
    ("speedup_ci_low", _NUMBER),
    ("speedup_ci_high", _NUMBER),
    ("best_speedup", _NUMBER),
    ("steps_left", _INT),
    ("seconds_left", _NUMBER),
    ("source", _STRING),
    ("report", _MAP_OR_NIL),
    ("text", _STRING),
    ("features", _NUMBERS),
)
_RESET = (("info", _MAP),)
_TASK_SUMMARY = (
    ("id", _STRING),
    ("suite", _STRING),
    ("category", _STRING),
    ("description", _STRING),
    ("signature", _STRING),
    ("flops", _NUMBER),
    ("bytes", _NUMBER),
    ("threads", _INT),
    ("backends", _STRINGS),
)
_TASK_INFO = _TASK_SUMMARY + (
    ("sizes", _MAP),
    ("check_sizes", _MAPS),
    ("inputs", _MAPS),
    ("outputs", _MAPS),
    ("tolerance", _MAP),
    ("knobs", _MAP),
    ("versions", _MAP),
)
_HEALTH = (
    ("status", _STRING),
    ("uptime_s", _NUMBER),
    ("sessions", _UNSIGNED),
    ("runners", _MAP),
    ("queued", _UNSIGNED),
    ("running", _UNSIGNED),
)
_STEP = (("reward", _NUMBER), ("terminated", _BOOL), ("truncated", _BOOL), ("info", _MAP))


def _check_episode_result(result: dict[str, Any], rest: tuple[tuple[str, _Kind], ...]) -> None:
    _check_fields(_check_map(_require(result, "", "observation"), "observation"), "observation", _OBSERVATION)
    _check_fields(result, "", rest)


def _check_health(result: dict[str, Any]) -> None:
    _check_fields(result, "", _HEALTH)
    runners = result["runners"]
    _check_fields(runners, "runners", tuple((backend, _INT) for backend in sorted(runners)))


def _check_tasks(result: dict[str, Any]) -> None:
    if type(result.get("tasks")) is not list:
        raise _BadField("field 'tasks' must be an array")
    for i, summary in enumerate(result["tasks"]):
        _check_fields(_check_map(summary, f"tasks[{i}]"), f"tasks[{i}]", _TASK_SUMMARY)


_RESULT_CHECKS = {
    "hello": lambda r: _check_fields(r, "", _HELLO),
    "tasks.list": _check_tasks,
    "tasks.get": lambda r: _check_fields(r, "", _TASK_INFO),
    "env.make": lambda r: _check_fields(r, "", _ENV_INFO),
    "env.fork": lambda r: _check_fields(r, "", _ENV_INFO),
    "env.reset": lambda r: _check_episode_result(r, _RESET),
    "env.step": lambda r: _check_episode_result(r, _STEP),
    "health": _check_health,
}


def check_result(op: str, result: dict[str, Any], reply_id: int = 0) -> None:
    """Raises ProtocolError when ``result`` lacks a field of ``op``'s result format or has it with
    the wrong type (docs/protocol.md, "Results"). Fields it does not know are fine; an integer
    is fine where a number is expected. Ops whose results are free-form maps pass."""
    check = _RESULT_CHECKS.get(op)
    if check is None:
        return
    try:
        _check_map(result, "")
        check(result)
    except _BadField as bad:
        raise ProtocolError(f"{op} reply {reply_id} has a malformed result: {bad}", reply_id) from None
