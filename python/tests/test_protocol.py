"""The wire format against the golden fixtures (tests/fixtures/protocol/, written by the C++
codec) and against bad input.

Requests: every request_*.msgpack, decoded with msgpack, re-encodes with encode_request to exactly
its bytes. Replies: every reply_*.msgpack decodes with decode_reply to exactly the value in its
reply_*.json, which the C++ fixture generator writes from the same C++ values it encodes
(make_fixtures.cc), compared type for type (1 is not 1.5), except that a C++ double holding an
integer (-1.0) is on the wire, and so decodes, as that integer: msgpack-c packs it so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from kernelgym import errors, protocol
from kernelgym.protocol import decode_reply, encode_request

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "protocol"
REQUESTS = sorted(FIXTURES.glob("request_*.msgpack"))
REPLIES = sorted(FIXTURES.glob("reply_*.msgpack"))


def assert_same_tree(got: Any, want: Any, path: str = "") -> None:
    """Equal values of equal types all the way down (Python's 1 == 1.0 would hide a float that
    decoded as an integer), where a float holding an integer is that integer (msgpack-c's
    canonical form of a double)."""
    if type(want) is float and want.is_integer():
        want = int(want)
    assert type(got) is type(want), f"{path or 'value'}: {got!r} is {type(got).__name__}, want {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want) or set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_tree(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{path}: {len(got)} items, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_tree(g, w, f"{path}[{i}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


# ---- golden fixtures ----------------------------------------------------------------------------


def test_the_fixtures_cover_every_op_and_action_kind():
    ops, kinds = set(), set()
    for path in REQUESTS:
        message = msgpack.unpackb(path.read_bytes())
        ops.add(message["op"])
        if message["op"] == "env.step":
            kinds.add(message["action"]["kind"])
    assert ops == set(protocol.OPS)
    assert kinds == set(protocol.ACTION_KINDS)
    assert {p.with_suffix(".json").name for p in REPLIES} == {p.name for p in FIXTURES.glob("reply_*.json")}


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.stem)
def test_request_fixture_reencodes_byte_for_byte(path):
    data = path.read_bytes()
    message = msgpack.unpackb(data, raw=False)
    assert list(message)[:3] == ["v", "id", "op"]
    fields = {k: v for k, v in message.items() if k not in ("v", "id", "op")}
    assert encode_request(message["id"], message["op"], **fields) == data
    # Field order and defaults are the encoder's, not the caller's: the fields given in reverse
    # order give the same bytes.
    assert encode_request(message["id"], message["op"], **dict(reversed(fields.items()))) == data


def test_action_helpers_encode_as_the_fixtures():
    def step(request_id: int, action: dict[str, Any]) -> bytes:
        return encode_request(request_id, "env.step", env="env-1", action=action)

    def fixture(name: str) -> bytes:
        return (FIXTURES / f"request_env_step_{name}.msgpack").read_bytes()

    assert step(7, protocol.replace('extern "C" void kernel() {}\n')) == fixture("replace")
    assert step(
        8, protocol.edit(("for (int i", "for (int64_t i"), {"search": "a[i]", "replace": "a[i + 1]"})
    ) == fixture("edit")
    assert step(9, protocol.patch("--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -1 +1 @@\n-a\n+b\n")) == fixture("patch")
    assert step(10, protocol.knobs(unroll=4, alpha=0.5, tile=64, order="ikj")) == fixture("knobs")
    assert step(11, protocol.revert(2)) == fixture("revert")
    assert step(12, protocol.submit()) == fixture("submit")
    meta = {"exchanges": [{"tokens": 42, "role": "planner", "completion": "## Analysis\n..."}], "policy": "llm-agent"}
    assert encode_request(16, "env.step", env="env-1", action=protocol.submit(), meta=meta) == fixture("meta")


def test_defaults_are_written_out_as_the_cpp_encoder_writes_them():
    reset = FIXTURES / "request_env_reset_no_seed.msgpack"
    assert encode_request(6, "env.reset", env="env-1") == reset.read_bytes()
    make = msgpack.unpackb(encode_request(4, "env.make", task="cpu/softmax_rows"))
    assert make == {
        "v": 1, "id": 4, "op": "env.make", "task": "cpu/softmax_rows", "backend": "cpu",
        "reward": "log_speedup_gain", "reward_config": {}, "max_steps": 0, "time_budget_s": 0, "record": False,
    }  # fmt: skip
    assert list(make) == [
        "v",
        "id",
        "op",
        "task",
        "backend",
        "reward",
        "reward_config",
        "max_steps",
        "time_budget_s",
        "record",
    ]


@pytest.mark.parametrize("path", REPLIES, ids=lambda p: p.stem)
def test_reply_fixture_decodes_to_the_cpp_value(path):
    want = json.loads(path.with_suffix(".json").read_text())
    reply = decode_reply(path.read_bytes())
    assert reply.id == want["id"]
    assert reply.ok is want["ok"]
    reply.op = want["op"]
    if want["ok"]:
        assert reply.error is None
        assert_same_tree(reply.result, want["result"])
        assert reply.unwrap() is reply.result  # the typed ops' results have every field they need
    else:
        assert reply.result is None
        e = reply.error
        assert type(e) is errors.ERRORS_BY_CODE[want["error"]["code"]]
        assert (e.code, e.message, e.details) == (
            want["error"]["code"],
            want["error"]["message"],
            want["error"]["details"],
        )
        with pytest.raises(type(e)):
            reply.unwrap()


def test_overloaded_fixture_says_when_to_retry():
    reply = decode_reply((FIXTURES / "reply_error_overloaded.msgpack").read_bytes())
    assert isinstance(reply.error, errors.Overloaded)
    assert reply.error.retry_after_s == 0.5


# ---- encoding: what is not a request ------------------------------------------------------------


@pytest.mark.parametrize(
    "op, fields, error, fragment",
    [
        ("env.explode", {}, ValueError, "unknown op 'env.explode'"),
        ("env.step", {"env": "e"}, TypeError, "needs the field 'action'"),
        ("tasks.get", {}, TypeError, "needs the field 'task'"),
        ("env.reset", {"env": "e", "sed": 1}, TypeError, "unknown field 'sed'"),
        ("hello", {"verbose": True}, TypeError, "unknown field 'verbose'"),
        ("env.make", {"task": 7}, TypeError, "field 'task' must be a string, not an integer"),
        ("env.make", {"task": "t", "max_steps": 2.0}, TypeError, "must be an integer, not a float"),
        ("env.make", {"task": "t", "max_steps": True}, TypeError, "must be an integer, not a boolean"),
        ("env.make", {"task": "t", "time_budget_s": "5"}, TypeError, "must be a number, not a string"),
        ("env.make", {"task": "t", "record": 1}, TypeError, "must be a boolean, not an integer"),
        ("env.make", {"task": "t", "reward_config": []}, TypeError, "must be a map, not an array"),
        ("env.make", {"task": "t", "reward_config": {1: 2}}, TypeError, "has a key that is an integer"),
        ("env.make", {"task": "t", "reward_config": {"a": {1, 2}}}, TypeError, "reward_config'.a must be nil"),
        ("env.reset", {"env": "e", "seed": "42"}, TypeError, "field 'seed' must be an integer, not a string"),
        ("env.step", {"env": "e", "action": "submit"}, TypeError, "action must be a map, not a string"),
        ("env.step", {"env": "e", "action": {"kind": "rewrite"}}, ValueError, "unknown action kind 'rewrite'"),
        ("env.step", {"env": "e", "action": {"source": "x"}}, ValueError, "unknown action kind None"),
        ("env.step", {"env": "e", "action": {"kind": "replace"}}, TypeError, "needs the field 'source'"),
        ("env.step", {"env": "e", "action": {"kind": "replace", "source": "x", "sauce": 1}}, TypeError, "unknown field 'sauce'"),
        ("env.step", {"env": "e", "action": {"kind": "submit", "now": True}}, TypeError, "unknown field 'now'"),
        ("env.step", {"env": "e", "action": {"kind": "edit", "edits": "x"}}, TypeError, "must be an array, not a string"),
        ("env.step", {"env": "e", "action": {"kind": "edit", "edits": [{"search": "a"}]}}, TypeError, "needs the fields 'search' and 'replace'"),
        ("env.step", {"env": "e", "action": {"kind": "edit", "edits": [("a", 1)]}}, TypeError, "edits[0].replace must be a string"),
        ("env.step", {"env": "e", "action": {"kind": "knobs", "values": {"tile": True}}}, TypeError, "an integer, a float or a string, not a boolean"),
        ("env.step", {"env": "e", "action": {"kind": "knobs", "values": {3: 1}}}, TypeError, "has a key that is an integer"),
        ("env.step", {"env": "e", "action": {"kind": "revert", "to_step": "2"}}, TypeError, "must be an integer, not a string"),
    ],
)  # fmt: skip
def test_a_malformed_request_is_refused_before_sending(op, fields, error, fragment):
    with pytest.raises(error) as caught:
        encode_request(1, op, **fields)
    assert fragment in str(caught.value)


def test_a_request_over_the_size_limit_is_refused_before_sending():
    at_limit = encode_request(1, "tasks.get", task="x" * (protocol.MAX_MESSAGE_BYTES - 64))
    assert len(at_limit) <= protocol.MAX_MESSAGE_BYTES
    with pytest.raises(ValueError, match="over the protocol's 8388608-byte limit"):
        encode_request(1, "tasks.get", task="x" * protocol.MAX_MESSAGE_BYTES)


def test_ranges_are_left_to_the_server():
    # Sent as they are: the server answers BAD_REQUEST naming the field (one place for the rules).
    make = msgpack.unpackb(encode_request(1, "env.make", task="t", max_steps=-1, time_budget_s=-2))
    assert (make["max_steps"], make["time_budget_s"]) == (-1, -2)
    step = msgpack.unpackb(encode_request(2, "env.step", env="e", action=protocol.edit()))
    assert step["action"] == {"kind": "edit", "edits": []}


def test_request_ids_are_uint64():
    assert msgpack.unpackb(encode_request(2**64 - 1, "hello"))["id"] == 2**64 - 1
    for bad in (-1, 2**64, True, "1"):
        with pytest.raises(ValueError):
            encode_request(bad, "hello")


def test_maps_are_canonical_whatever_the_callers_order():
    a = encode_request(1, "env.make", task="t", reward_config={"z": {"b": 1, "a": [1.5, None]}, "y": True})
    b = encode_request(1, "env.make", task="t", reward_config={"y": True, "z": {"a": (1.5, None), "b": 1}})
    assert a == b
    assert list(msgpack.unpackb(a)["reward_config"]) == ["y", "z"]


@pytest.mark.parametrize(
    "number, packed",
    [
        (5, b"\x05"),
        (5.0, b"\x05"),  # msgpack-c's pack_double: an integral double is packed as the integer
        (-0.0, b"\x00"),
        (-1.0, b"\xff"),
        (600.0, b"\xcd\x02\x58"),
        (2.0**63, b"\xcf\x80" + bytes(7)),
        (-(2.0**63), b"\xd3\x80" + bytes(7)),
        (120.5, b"\xcb\x40\x5e\x20" + bytes(5)),
        (2.0**64, b"\xcb\x43\xf0" + bytes(6)),
        (float("inf"), b"\xcb\x7f\xf0" + bytes(6)),
    ],
)
def test_numbers_are_packed_as_msgpack_c_packs_a_double(number, packed):
    budget = encode_request(1, "env.make", task="t", time_budget_s=number)
    assert budget.endswith(b"\xadtime_budget_s" + packed + b"\xa6record\xc2")
    knob = encode_request(1, "env.step", env="e", action=protocol.knobs(k=number))
    assert knob.endswith(b"\xa1k" + packed + b"\xa4meta\x80")
    config = encode_request(1, "env.make", task="t", reward_config={"k": [number]})
    assert b"\xadreward_config\x81\xa1k\x91" + packed in config


# ---- decoding: what is not a reply --------------------------------------------------------------


def raw_map(*pairs: tuple[Any, Any]) -> bytes:
    """A msgpack map with exactly these pairs, in this order (duplicates included)."""
    return msgpack.Packer(use_bin_type=True).pack_map_pairs(list(pairs))


def ok_reply(result: Any, **extra: Any) -> bytes:
    return pack({"v": 1, "id": 9, "ok": True, "result": result, **extra})


def error_reply(error: Any, **extra: Any) -> bytes:
    return pack({"v": 1, "id": 9, "ok": False, "error": error, **extra})


def nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


ERROR = {"code": "UNKNOWN_ENV", "message": "no env", "details": {"op": "env.step"}}


@pytest.mark.parametrize(
    "data, fragment, reply_id",
    [
        (b"\xc1", "not a valid msgpack reply", 0),
        (b"", "not a valid msgpack reply", 0),
        (ok_reply({}) + b"\x00", "not a valid msgpack reply", 0),
        (pack([1, 9, True]), "must be a map, not an array", 0),
        (pack({"id": 9, "ok": True, "result": {}}), "needs the field 'v'", 9),
        (pack({"v": 2, "id": 9, "ok": True, "result": {}}), "unsupported protocol version 2", 9),
        (pack({"v": "1", "id": 9, "ok": True, "result": {}}), "field 'v' must be an integer, not a string", 9),
        (pack({"v": 1, "ok": True, "result": {}}), "needs the field 'id'", 0),
        (pack({"v": 1, "id": -3, "ok": True, "result": {}}), "field 'id' must be a non-negative integer", 0),
        (pack({"v": 1, "id": 9, "ok": 1, "result": {}}), "field 'ok' must be a boolean, not an integer", 9),
        (pack({"v": 1, "id": 9, "ok": True}), "needs the field 'result'", 9),
        (ok_reply([1, 2]), "result: must be a map, not an array", 9),
        (ok_reply({}, extra=1), "unknown field 'extra'", 9),
        (ok_reply({}, error=ERROR), "unknown field 'error'", 9),
        (pack({"v": 1, "id": 9, "ok": False}), "needs the field 'error'", 9),
        (pack({"v": 1, "id": 9, "error": ERROR, "result": {}}), "unknown field 'result'", 9),
        (error_reply("UNKNOWN_ENV"), "field 'error' must be a map, not a string", 9),
        (error_reply({"message": "m"}), "needs the field 'code'", 9),
        (error_reply({"code": "OOPS", "message": "m"}), "unknown error code 'OOPS'", 9),
        (error_reply({"code": "UNKNOWN_ENV", "message": 5}), "field 'message' must be a string, not an integer", 9),
        (error_reply({**ERROR, "details": None}), "details: must be a map, not nil", 9),
        (error_reply({**ERROR, "details": {"retry_after_s": 0.5}}), "field 'retry_after_s' must be a string, not a float", 9),
        (error_reply({**ERROR, "hint": "x"}), "unknown field 'hint'", 9),
        (raw_map(("v", 1), ("id", 9), ("ok", True), ("result", {}), ("ok", True)), "the key 'ok' twice", 0),
        (ok_reply({"a": 1, 2: "b"}), "a key that is an integer, not a string", 0),
        (ok_reply({"a": b"bytes"}), "a reply may not hold bytes", 9),
        (ok_reply({"a": [1, [b""]]}), "a reply may not hold bytes", 9),
        (ok_reply({"a": msgpack.ExtType(1, b"x")}), "not a valid msgpack reply", 0),
        (ok_reply(nested(32)), "nested more than 32 deep", 9),  # 33 levels with the envelope
    ],
)  # fmt: skip
def test_a_malformed_reply_is_a_protocol_error(data, fragment, reply_id):
    with pytest.raises(errors.ProtocolError) as caught:
        decode_reply(data)
    assert fragment in str(caught.value)
    assert caught.value.id == reply_id


def test_a_reply_may_nest_32_deep_and_leaves_ignored_fields_alone():
    reply = decode_reply(ok_reply(nested(31)))  # 32 levels with the envelope: the C++ limit
    assert reply.ok and reply.id == 9
    duplicate_inside = raw_map(("v", 1), ("id", 9), ("ok", True), ("result", {"a": 1}))
    assert decode_reply(duplicate_inside).result == {"a": 1}
    # An error's details are optional.
    no_details = decode_reply(error_reply({"code": "EPISODE_OVER", "message": "call reset"}))
    assert isinstance(no_details.error, errors.EpisodeOver) and no_details.error.details == {}


def golden_result(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["result"]


@pytest.mark.parametrize(
    "op, fixture, change, fragment",
    [
        ("env.step", "reply_env_step", lambda r: r["observation"].pop("speedup"), "missing field 'observation.speedup'"),
        ("env.step", "reply_env_step", lambda r: r["observation"].update(speedup="3x"), "field 'observation.speedup' must be a number, not a string"),
        ("env.step", "reply_env_step", lambda r: r["observation"]["features"].__setitem__(2, None), "field 'observation.features[2]' must be a number, not nil"),
        ("env.step", "reply_env_step", lambda r: r["observation"].update(report=[]), "field 'observation.report' must be a map, not an array"),
        ("env.step", "reply_env_step", lambda r: r.update(terminated=0), "field 'terminated' must be a boolean, not an integer"),
        ("env.step", "reply_env_step", lambda r: r.update(observation=None), "field 'observation' must be a map, not nil"),
        ("env.reset", "reply_env_reset", lambda r: r.pop("info"), "missing field 'info'"),
        ("env.reset", "reply_env_reset", lambda r: r["observation"].update(step=0.0), "field 'observation.step' must be an integer, not a float"),
        ("env.make", "reply_env_make", lambda r: r.pop("env"), "missing field 'env'"),
        ("env.fork", "reply_env_fork", lambda r: r.update(record="yes"), "field 'record' must be a boolean, not a string"),
        ("hello", "reply_hello", lambda r: r["feature_names"].append(3), "field 'feature_names[15]' must be a string, not an integer"),
        ("hello", "reply_hello", lambda r: r.update(max_message_bytes=-1), "field 'max_message_bytes' must be a non-negative integer"),
        ("hello", "reply_hello", lambda r: r.update(protocol=2**63), "field 'protocol' is out of range"),
        ("tasks.list", "reply_tasks_list", lambda r: r.pop("tasks"), "field 'tasks' must be an array"),
        ("tasks.list", "reply_tasks_list", lambda r: r["tasks"][1].pop("backends"), "missing field 'tasks[1].backends'"),
        ("tasks.get", "reply_tasks_get", lambda r: r.pop("versions"), "missing field 'versions'"),
        ("tasks.get", "reply_tasks_get", lambda r: r.update(knobs=[]), "field 'knobs' must be a map, not an array"),
        ("health", "reply_health", lambda r: r.pop("status"), "missing field 'status'"),
        ("health", "reply_health", lambda r: r.update(runners=[]), "field 'runners' must be a map, not an array"),
        ("health", "reply_health", lambda r: r["runners"].update(cpu="two"), "field 'runners.cpu' must be an integer, not a string"),
        ("health", "reply_health", lambda r: r.update(sessions=-1), "field 'sessions' must be a non-negative integer"),
    ],
)  # fmt: skip
def test_a_result_lacking_a_known_field_is_a_protocol_error(op, fixture, change, fragment):
    result = golden_result(fixture)
    change(result)
    reply = decode_reply(ok_reply(result))
    reply.op = op
    with pytest.raises(errors.ProtocolError) as caught:
        reply.unwrap()
    assert str(caught.value) == f"{op} reply 9 has a malformed result: {fragment}" or fragment in str(caught.value)
    assert caught.value.id == 9


def test_results_accept_integers_for_numbers_nil_reports_and_unknown_fields():
    result = golden_result("reply_env_step")
    result.update(reward=2, added_by_a_newer_server={"x": 1})
    result["observation"].update(report=None, speedup=3, features=[1, 0.5])
    reply = decode_reply(ok_reply(result))
    reply.op = "env.step"
    assert reply.unwrap()["reward"] == 2
    # Ops whose results are free-form maps are not checked.
    for op in ("env.close", "stats"):
        reply.op = op
        reply.result = {"anything": [1]}
        assert reply.unwrap() == {"anything": [1]}
