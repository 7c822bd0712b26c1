"""The sync Client against the real server (null backend) and against a stand-in ROUTER for
what a real server does not do on demand (stay silent, answer late, answer garbage)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import zmq
from fake_server import FakeServer, reply_bytes

import kernelgym
from kernelgym import Client, errors, protocol, text
from kernelgym.protocol import edit, replace, revert, submit

TASK = "cpu/softmax_rows"
HELLO = json.loads((Path(__file__).resolve().parents[2] / "tests/fixtures/protocol/reply_hello.json").read_text())[
    "result"
]


@pytest.fixture
def client(server):
    with Client(server.address, timeout_s=60) as c:
        yield c


def test_hello_says_what_the_server_offers(client):
    hello = client.hello()
    assert hello["protocol"] == protocol.VERSION
    assert hello["server"].startswith("kernelgym ")
    assert "null" in hello["backends"]
    assert hello["action_kinds"] == list(protocol.ACTION_KINDS)
    assert "log_speedup_gain" in hello["rewards"]
    assert hello["feature_names"] and all(isinstance(name, str) for name in hello["feature_names"])
    assert hello["max_message_bytes"] == protocol.MAX_MESSAGE_BYTES


def test_hello_describes_each_backend_and_the_text_helpers_use_it(client):
    # The descriptors are what clients read instead of comparing backend names.
    hello = client.hello()
    infos = hello["backend_info"]
    assert [info["name"] for info in infos] == hello["backends"]
    by_name = {info["name"]: info for info in infos}
    assert by_name["null"]["evaluated_by_server"] is True
    cpu = by_name.get("cpu")
    if cpu is not None:
        assert (cpu["language"], cpu["source_file"], cpu["task_folder"]) == ("cpp", "kernel.cpp", "")
        assert cpu["source_mutations"] and cpu["times_on_any_host"] and not cpu["evaluated_by_server"]
    try:
        # A server that describes a backend its own way is believed: the parser follows it.
        text.use_backend_info([{"name": "toy", "language": "toylang", "fence_tags": ["toylang"]}])
        assert text.fence_language("toy") == "toylang"
        action = text.parse_action("```toylang\nkernel body\n```", backend="toy")
        assert action == {"kind": "replace", "source": "kernel body\n"}
        try:
            text.parse_action("```cpp\nkernel body\n```", backend="toy")
        except text.ActionParseError:
            pass
        else:
            raise AssertionError("a cpp block is not the toy backend's kernel")
    finally:
        text._BACKEND_INFO.pop("toy", None)


def test_tasks_are_listed_and_described(client):
    tasks = client.list_tasks()
    assert TASK in {t["id"] for t in tasks}
    cpu = client.list_tasks("cpu")
    assert cpu and all(t["suite"] == "cpu" for t in cpu)
    assert client.list_tasks("no-such-suite") == []
    task = client.get_task(TASK)
    assert task["id"] == TASK
    cpu = task["versions"]["cpu"]
    assert "kernel" in cpu["starter_source"] and "def reference" in cpu["reference_source"]
    assert task["sizes"] and task["inputs"] and task["outputs"] and set(task["tolerance"]) == {"atol", "rtol"}
    assert all(t["shape"] and len(t["shape"]) == len(t["dims"]) for t in task["inputs"] + task["outputs"])
    assert "spec" not in task, "the raw task file is not part of the answer"
    with pytest.raises(errors.UnknownTask) as caught:
        client.get_task("cpu/no_such_task")
    assert caught.value.op == "tasks.get"
    assert caught.value.details == {"op": "tasks.get", "task": "cpu/no_such_task"}


def test_an_episode_make_reset_step_fork_close(client):
    info = client.make(TASK, backend="null", max_steps=4)
    assert (info["task"], info["backend"], info["reward"], info["max_steps"], info["record"]) == (
        TASK, "null", "log_speedup_gain", 4, False,
    )  # fmt: skip
    env = info["env"]
    start = client.reset(env, seed=7)
    first = start["observation"]
    assert (first["step"], first["status"], first["steps_left"]) == (0, "ok", 4)
    assert start["info"]["seed"] == 7
    assert len(first["features"]) == len(client.hello()["feature_names"])

    changed = client.step(env, replace(first["source"] + "// one\n"))
    assert changed["observation"]["step"] == 1
    assert changed["observation"]["source"].endswith("// one\n")
    assert isinstance(changed["reward"], (int, float))
    assert changed["terminated"] is False and changed["truncated"] is False

    fork = client.fork(env)
    assert fork["env"] != env and (fork["task"], fork["backend"]) == (TASK, "null")
    reverted = client.step(fork["env"], revert(0))
    assert reverted["observation"]["step"] == 2 and reverted["observation"]["reused"] is True
    assert reverted["observation"]["source"] == first["source"]

    # The parent did not see the fork's step.
    done = client.step(env, submit())
    assert done["terminated"] is True and done["observation"]["step"] == 2
    assert done["observation"]["source"].endswith("// one\n")
    with pytest.raises(errors.EpisodeOver) as over:
        client.step(env, submit())
    assert over.value.op == "env.step" and over.value.details["op"] == "env.step"

    client.close_env(env)
    client.close_env(fork["env"])
    with pytest.raises(errors.UnknownEnv) as unknown:
        client.reset(env)
    assert unknown.value.details["op"] == "env.reset"
    assert "env.reset: UNKNOWN_ENV: " in str(unknown.value)


def test_errors_are_typed(client):
    env = client.make(TASK, backend="null")["env"]
    with pytest.raises(errors.EpisodeOver):
        client.step(env, submit())  # before the first reset
    client.reset(env)
    with pytest.raises(errors.BadRequest) as bad:
        client.step(env, edit())  # no edit blocks
    assert bad.value.details["op"] == "env.step"
    assert "edits" in bad.value.message
    with pytest.raises(errors.BadRequest) as bad:
        client.make(TASK, backend="null", max_steps=-1)
    assert bad.value.details["op"] == "env.make" and "max_steps" in bad.value.message
    with pytest.raises(errors.UnknownBackend):
        client.make(TASK, backend="no_such_backend")
    with pytest.raises(errors.UnknownReward) as reward:
        client.make(TASK, backend="null", reward="no_such_reward")
    assert reward.value.details["reward"] == "no_such_reward"
    with pytest.raises(errors.UnknownEnv):
        client.step("env-0000", submit())
    # Still serving, and every failure was an error reply, not a lost connection.
    client.close_env(env)
    assert client.stats()["errors"]["BAD_REQUEST"] >= 2


def test_64_envs_pipelined_with_send_and_recv(client):
    envs = [client.make(TASK, backend="null", max_steps=100)["env"] for _ in range(64)]
    for env in envs:
        client.reset(env, seed=1)
    steps = dict.fromkeys(envs, 0)

    def send(env: str) -> int:
        return client.send("env.step", env=env, action=replace(f"// {env} step {steps[env] + 1}\n"))

    in_flight = {send(env): env for env in envs}
    assert client.outstanding() == 64
    # A sync call while 64 sends are outstanding: replies to them that arrive meanwhile are kept.
    assert client.stats()["sessions"] >= 64
    while in_flight:
        reply = client.recv(timeout_s=60)
        assert reply is not None, f"{len(in_flight)} replies missing"
        env = in_flight.pop(reply.id)
        assert reply.op == "env.step" and reply.ok
        steps[env] += 1
        result = reply.unwrap()
        assert result["observation"]["step"] == steps[env]
        assert result["observation"]["source"] == f"// {env} step {steps[env]}\n"
        if steps[env] < 5:
            in_flight[send(env)] = env
    assert set(steps.values()) == {5}
    assert client.outstanding() == 0
    assert client.recv(timeout_s=0) is None
    assert client.stray_replies == 0
    for env in envs:
        client.close_env(env)


def test_sync_calls_and_sends_mix_without_losing_replies(client):
    env = client.make(TASK, backend="null")["env"]
    client.reset(env)
    step_id = client.send("env.step", env=env, action=replace("// a\n"))
    error_id = client.send("env.step", env="env-0000", action=submit())
    hello = client.hello()  # both replies are likely to arrive while this waits
    assert hello["protocol"] == 1
    assert client.outstanding() == 2
    replies = {}
    while client.outstanding():
        reply = client.recv(timeout_s=60)
        replies[reply.id] = reply
    assert set(replies) == {step_id, error_id}
    assert replies[step_id].unwrap()["observation"]["step"] == 1
    failed = replies[error_id]
    assert not failed.ok and isinstance(failed.error, errors.UnknownEnv) and failed.error.op == "env.step"
    with pytest.raises(errors.UnknownEnv):
        failed.unwrap()
    assert client.recv() is None  # nothing outstanding: at once, even without a timeout
    client.close_env(env)


def test_a_cpu_reset_with_one_local_runner(start_server):
    s = start_server("--local-runners", "1")
    with Client(s.address, timeout_s=300) as c:
        env = c.make(TASK)["env"]
        observation = c.reset(env, seed=3)["observation"]
        assert observation["status"] == "ok", observation["text"]
        assert observation["speedup"] > 0
        assert observation["report"]["backend"] == "cpu"
        assert "cpu" in c.hello()["backends"]
        c.close_env(env)


def test_a_candidates_bytes_reach_the_client_as_valid_text(start_server):
    # Kernels whose evaluation produces bytes that are not UTF-8 (stderr, a symbol name) or text
    # imitating the report (tests/adversarial/): the reply used to be undecodable here ("utf-8"
    # codec can't decode byte 0xff), and the observation text carried the kernel's escape sequences.
    s = start_server("--local-runners", "1")
    adversarial = Path(__file__).resolve().parents[2] / "tests" / "adversarial"
    with Client(s.address, timeout_s=300) as c:
        for case in ("output_invalid_utf8_kernel", "symbol_name_invalid_utf8", "output_forges_verdict"):
            expected = json.loads((adversarial / case / "expected.json").read_text())
            env = c.make(expected["task"], max_steps=2)["env"]
            c.reset(env, seed=5)
            observation = c.step(env, replace((adversarial / case / "kernel.cpp").read_text()))["observation"]
            assert observation["status"] == expected["status"], observation["text"]
            text = observation["text"]
            assert not any(ord(ch) < 0x20 and ch not in "\t\n" for ch in text), text
            if case != "output_forges_verdict":
                assert "\ufffd" in text, text
            else:
                assert "\\x1b[1A\\x1b[2K" in text, text
            c.close_env(env)


# ---- transport: a stand-in server --------------------------------------------------------------


def test_a_step_without_reply_is_a_transport_error_and_is_never_resent():
    def answer_only_hello(routing_id, request):
        return [reply_bytes(request["id"], HELLO)] if request["op"] == "hello" else None

    with FakeServer(answer_only_hello) as fake, Client(fake.address, timeout_s=0.3, backoff_initial_s=0.01) as c:
        started = time.monotonic()
        with pytest.raises(errors.TransportError, match="not retried: env.step is not idempotent"):
            c.step("env-1", submit())
        assert time.monotonic() - started >= 0.3
        _, request = fake.next_request()
        assert (request["op"], request["env"]) == ("env.step", "env-1")
        assert c.hello() == HELLO  # the same client still works
        _, after = fake.next_request()
        assert after["op"] == "hello"  # and the step was not sent again in between


def test_a_late_reply_to_an_abandoned_request_is_dropped():
    late: list[int] = []

    def handler(routing_id, request):
        if request["op"] == "env.step":
            late.append(request["id"])
            return None
        # The step's reply comes only now, just before hello's.
        return [reply_bytes(late[0], {"stale": True}), reply_bytes(request["id"], HELLO)]

    with FakeServer(handler) as fake, Client(fake.address, timeout_s=0.5) as c:
        with pytest.raises(errors.TransportError):
            c.step("env-1", submit())
        assert c.hello() == HELLO
        assert c.recv(timeout_s=0) is None
        assert c.stray_replies == 0
        assert fake.received.qsize() == 2


def test_hello_is_retried_on_a_fresh_socket():
    connections: list[bytes] = []

    def answer_from_the_third_attempt_on(routing_id, request):
        connections.append(routing_id)
        return [reply_bytes(request["id"], HELLO)] if len(connections) >= 3 else None

    with (
        FakeServer(answer_from_the_third_attempt_on) as fake,
        Client(fake.address, timeout_s=0.5, retries=3, backoff_initial_s=0.01, backoff_max_s=0.05) as c,
    ):
        assert c.hello() == HELLO
    # Each attempt on its own connection (a 4th only if this machine stalled for 0.5 s).
    assert len(connections) >= 3 and len(set(connections)) == len(connections)
    ids = [fake.next_request()[1]["id"] for _ in connections]
    assert len(set(ids)) == len(ids)


def test_retries_end_in_a_transport_error():
    with FakeServer() as fake:
        with (
            Client(fake.address, timeout_s=0.1, retries=2, backoff_initial_s=0.01) as c,
            pytest.raises(errors.TransportError, match="in each of 3 attempts"),
        ):
            c.stats()
        requests = [fake.next_request() for _ in range(3)]
    assert [r["op"] for _, r in requests] == ["stats"] * 3
    assert len({routing_id for routing_id, _ in requests}) == 3
    assert fake.received.empty()


def test_a_reply_to_an_earlier_attempt_answers_the_call():
    first: list[tuple[bytes, int]] = []

    def answer_the_first_when_the_second_comes(routing_id, request):
        if not first:
            first.append((routing_id, request["id"]))
            return None
        old_connection, old_id = first[0]
        return [(old_connection, reply_bytes(old_id, HELLO))]

    with (
        FakeServer(answer_the_first_when_the_second_comes) as fake,
        Client(fake.address, timeout_s=0.5, retries=3, backoff_initial_s=0.01) as c,
    ):
        assert c.hello() == HELLO
        assert c.stray_replies == 0
        assert fake.received.qsize() == 2


@pytest.mark.parametrize(
    "answer, fragment, reply_id",
    [
        (lambda request: [b"\xc1"], "reply is malformed: not a valid msgpack reply", 0),
        (lambda request: [[reply_bytes(request["id"], HELLO), b"more"]], "several message parts", 0),
        (lambda request: [reply_bytes(request["id"], {"protocol": 1})], "hello reply 1 has a malformed result: missing field 'server'", 1),
        (lambda request: [reply_bytes(request["id"], [])], "hello reply 1 is malformed: result: must be a map, not an array", 1),
    ],
)  # fmt: skip
def test_an_unreadable_reply_is_a_protocol_error(answer, fragment, reply_id):
    with FakeServer(lambda routing_id, request: answer(request)) as fake, Client(fake.address, timeout_s=10) as c:
        with pytest.raises(errors.ProtocolError) as caught:
            c.hello()
        assert fragment in str(caught.value)
        assert caught.value.id == reply_id


def test_recv_waits_only_as_long_as_told():
    with FakeServer() as fake, Client(fake.address, timeout_s=10) as c:
        request_id = c.send("env.step", env="env-1", action=submit())
        assert c.recv(timeout_s=0.05) is None
        assert c.outstanding() == 1
        assert fake.next_request()[1]["id"] == request_id


def test_a_malformed_address_is_a_transport_error():
    with pytest.raises(errors.TransportError, match="cannot connect"):
        Client("not-an-endpoint")


def test_a_malformed_request_raises_before_anything_is_sent():
    with FakeServer() as fake, Client(fake.address, timeout_s=10) as c:
        with pytest.raises(ValueError, match="unknown action kind"):
            c.step("env-1", {"kind": "rewrite"})
        with pytest.raises(TypeError, match="unknown field 'sed'"):
            c.send("env.reset", env="env-1", sed=3)
        assert c.outstanding() == 0
    assert fake.received.empty()


def test_the_socket_reconnects_by_itself_and_never_lingers():
    with Client("tcp://127.0.0.1:1", timeout_s=2.5, backoff_initial_s=0.25, backoff_max_s=4) as c:
        (socket,) = c._connections  # one DEALER until a retry needs a fresh one
        assert socket.getsockopt(zmq.TYPE) == zmq.DEALER
        assert socket.getsockopt(zmq.LINGER) == 0
        assert socket.getsockopt(zmq.RECONNECT_IVL) == 250
        assert socket.getsockopt(zmq.RECONNECT_IVL_MAX) == 4000
        assert socket.getsockopt(zmq.SNDTIMEO) == 2500


def test_a_steps_meta_is_recorded_with_its_transition(start_server):
    # What an LLM policy sends with a step (its prompts and completions) is kept in the store.
    server = start_server("--local-runners", "0", "--null-backend")
    meta = {"policy": "my-llm", "exchanges": [{"role": "implementer", "completion": "```cpp\nint a;\n```"}]}
    with Client(server.address) as c:
        env = c.make(TASK, backend="null", record=True)["env"]
        c.reset(env, seed=1)
        c.step(env, replace("// a\n"), meta=meta)
        c.step(env, replace("// b\n"))
        with pytest.raises(TypeError):
            c.step(env, replace("// c\n"), meta=["not", "a", "map"])
    assert server.stop() == 0
    records = [json.loads(line) for f in sorted((server.dir / "store").rglob("*.jsonl")) for line in f.read_text().splitlines()]
    transitions = {r["step"]: r for r in records if r["kind"] == "transition"}
    assert transitions[1]["meta"] == meta
    assert "meta" not in transitions[2]


def test_no_server_fails_fast_and_says_how_to_start_one():
    # A port nothing listens on: the default connect_timeout_s (5 s), not timeout_s x retries.
    start = time.monotonic()
    with pytest.raises(errors.TransportError, match="kernelgym serve"):
        kernelgym.make("cpu/softmax_rows", address="tcp://127.0.0.1:1")
    assert time.monotonic() - start < 10
    with Client("tcp://127.0.0.1:1", connect_timeout_s=0.5) as c:
        start = time.monotonic()
        with pytest.raises(errors.TransportError, match="no kernelgym server at tcp://127.0.0.1:1"):
            c.hello()
        assert time.monotonic() - start < 3


def test_a_silent_server_is_not_mistaken_for_no_server():
    # A server that accepts the connection but is slow to answer gets the whole timeout_s.
    with FakeServer() as fake, Client(fake.address, timeout_s=1.5, retries=0, connect_timeout_s=0.2) as c:
        start = time.monotonic()
        with pytest.raises(errors.TransportError, match="no reply"):
            c.hello()
        assert time.monotonic() - start >= 1.4
