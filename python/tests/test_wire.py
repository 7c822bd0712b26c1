"""The server against hostile and careless clients, spoken to in raw bytes over a DEALER socket
and read back with msgpack's strict (default) decoder, as any client in another language would."""

from __future__ import annotations

import time

import msgpack
import pytest
import zmq

from kernelgym import Client


def exchange(address: str, messages: list[bytes], timeout_ms: int = 10000) -> list[dict]:
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)
    try:
        for message in messages:
            socket.send(message)
        replies = []
        for _ in messages:
            assert socket.poll(timeout_ms), "no reply"
            replies.append(msgpack.unpackb(socket.recv()))  # strict: invalid UTF-8 would raise here
        return replies
    finally:
        socket.close(linger=0)
        context.term()


def test_invalid_utf8_is_refused_with_a_reply_a_strict_decoder_reads(server):
    # The exact bytes from the issue: {v: 1, id: 1, op: "\xff\xfe\xfd"}.
    bad_op = bytes.fromhex("83a17601a26964 01a26f70a3fffefd".replace(" ", ""))
    # A str field holding invalid UTF-8: packed with a placeholder of the same length, then patched.
    bad_task = msgpack.packb({"v": 1, "id": 2, "op": "env.make", "task": "cpu/PLACEHOLDER"})
    bad_task = bad_task.replace(b"cpu/PLACEHOLDER", b"cpu/\xff\xfe" + b"x" * 9)
    replies = exchange(server.address, [bad_op, bad_task])
    assert [r["id"] for r in replies] == [1, 2]
    assert all(r["ok"] is False and r["error"]["code"] == "BAD_REQUEST" for r in replies)
    assert "not valid UTF-8" in replies[0]["error"]["message"]
    # ...and stats stays readable for every strict client.
    with Client(server.address) as client:
        assert "?" in client.stats()["requests"]


def test_stats_keep_one_counter_per_protocol_op_whatever_the_clients_send(server):
    ops = [msgpack.packb({"v": 1, "id": i + 1, "op": f"no.such.op.{i}." + "x" * 10000}) for i in range(50)]
    replies = exchange(server.address, ops)
    assert all(r["error"]["code"] == "UNKNOWN_OP" and len(r["error"]["message"]) < 200 for r in replies)
    with Client(server.address) as client:
        requests = client.stats()["requests"]
    assert set(requests) <= {"hello", "tasks.list", "tasks.get", "env.make", "env.reset", "env.step", "env.fork",
                             "env.close", "stats", "health", "?"}, sorted(requests)[:5]


def test_version_and_id_rules(server):
    replies = exchange(server.address, [msgpack.packb({"v": 2**63, "id": 3, "op": "hello"}),
                                        msgpack.packb({"v": 1, "id": 0, "op": "hello"})])
    assert replies[0]["id"] == 3 and replies[0]["error"]["code"] == "UNSUPPORTED_VERSION"
    assert replies[1]["id"] == 0 and replies[1]["error"]["code"] == "BAD_REQUEST"
    assert "'id' must be >= 1" in replies[1]["error"]["message"]


def test_an_error_reply_stays_small_whatever_the_client_sent(server):
    env = "env-" + "x" * 100_000
    [reply] = exchange(server.address, [msgpack.packb({"v": 1, "id": 5, "op": "env.close", "env": env})])
    assert reply["id"] == 5 and reply["error"]["code"] == "UNKNOWN_ENV"
    assert len(reply["error"]["message"]) <= 4096 + 3 and reply["error"]["message"].endswith("...")


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_replies_nobody_reads_cost_the_server_a_bounded_amount(start_server):
    # 3,000 tasks.list (each reply ~100 KB) on a connection that never reads: the server keeps at
    # most 100 in ZeroMQ's queue and 64 MiB in its outbox for it, and drops (counts) the rest.
    server = start_server("--local-runners", "0", "--null-backend")
    with Client(server.address) as client:
        client.health()
        baseline = rss_mb(server.pid)
        context = zmq.Context()
        silent = context.socket(zmq.DEALER)
        silent.setsockopt(zmq.LINGER, 0)
        silent.connect(server.address)
        try:
            for i in range(3000):
                silent.send(msgpack.packb({"v": 1, "id": i + 1, "op": "tasks.list", "suite": ""}))
            peak = 0.0
            for _ in range(100):  # until every request was handled (at most 20 s)
                stats = client.stats()
                peak = max(peak, rss_mb(server.pid) - baseline)
                if stats["requests"].get("tasks.list", 0) >= 3000:
                    break
                time.sleep(0.2)
            assert stats["undeliverable_replies"] > 0
            assert peak < 200, f"the server grew by {peak:.0f} MB for replies nobody read"
            assert client.health()["status"] == "ok"
        finally:
            silent.close(linger=0)
            context.term()
        # A client that reads, however much it pipelines, loses nothing: 2,000 requests in flight.
        ids = {client.send("health") for _ in range(2000)}
        while ids:
            reply = client.recv(timeout_s=30)
            assert reply is not None, f"{len(ids)} replies lost"
            ids.discard(reply.id)


def test_replies_held_for_all_silent_connections_together_are_bounded(start_server):
    # Each connection may hold 64 MiB of unread replies; many connections together may not hold
    # more than --max-outbox-bytes (here 8 MiB, under what one connection alone would fill).
    server = start_server("--local-runners", "0", "--null-backend", "--max-outbox-bytes", str(8 << 20))
    context = zmq.Context()
    silent = []
    try:
        with Client(server.address) as client:
            for c in range(3):
                socket = context.socket(zmq.DEALER)
                socket.setsockopt(zmq.LINGER, 0)
                socket.setsockopt(zmq.RCVHWM, 1)  # its own queue takes (almost) nothing off the server's
                socket.connect(server.address)
                silent.append(socket)
                for i in range(400):
                    socket.send(msgpack.packb({"v": 1, "id": i + 1, "op": "tasks.list", "suite": ""}))
            held = []
            for _ in range(100):  # until every request was handled (at most 20 s)
                stats = client.stats()
                held.append(stats["client_outbox_bytes"])
                if stats["requests"].get("tasks.list", 0) >= 1200:
                    break
                time.sleep(0.2)
            assert stats["requests"]["tasks.list"] == 1200
            assert max(held) <= 8 << 20
            assert held[-1] > (8 << 20) - 200_000  # filled to the bound, not below it
            assert stats["client_outboxes"] >= 1 and stats["undeliverable_replies"] > 0
            assert client.health()["status"] == "ok"  # a client that reads is still answered
    finally:
        for socket in silent:
            socket.close(linger=0)
        context.term()


def test_a_request_over_the_limit_is_refused_by_the_client_unsent(start_server):
    """Past 64 MiB the server's socket closes the connection with every reply queued on it, so the
    client refuses anything over the protocol's limit before it is sent."""
    server = start_server("--local-runners", "0", "--null-backend")
    with Client(server.address) as client:
        env = client.make("cpu/softmax_rows", backend="null")["env"]
        client.reset(env)
        pending = client.send("health")
        with pytest.raises(ValueError, match="8388608-byte limit; nothing was sent"):
            client.step(env, {"kind": "replace", "source": "x" * (65 << 20)})
        reply = client.recv(timeout_s=30)  # the reply already on its way is not lost
        assert reply is not None and reply.id == pending and reply.ok
        assert client.step(env, {"kind": "submit"})["terminated"]
        assert client.stats()["undeliverable_replies"] == 0


def test_the_documented_limits_hold(start_server):
    """docs/protocol.md, "Limits": each limit a client can reach, against the server."""
    server = start_server("--local-runners", "0", "--null-backend", "--max-sessions", "2")
    deep: object = 1
    for _ in range(33):
        deep = {"a": deep}
    oversized = msgpack.packb({"v": 1, "id": 21, "op": "env.step", "env": "e", "action": {"kind": "replace",
                               "source": "x" * (8 << 20)}})
    replies = exchange(server.address, [
        oversized,
        msgpack.packb({"v": 1, "id": 22, "op": "env.step", "env": "e", "action": {"kind": "submit"}, "meta": deep}),
        msgpack.packb({"v": 1, "id": 23, "op": "env.make", "task": "cpu/softmax_rows", "backend": "null",
                       "max_steps": 10001}),
    ])
    assert [r["id"] for r in replies] == [21, 22, 23]
    assert all(r["error"]["code"] == "BAD_REQUEST" for r in replies)
    assert "8388608-byte limit" in replies[0]["error"]["message"]
    assert "32 levels" in replies[1]["error"]["message"] or "depth" in replies[1]["error"]["message"]
    assert "max_steps" in replies[2]["error"]["message"]
    # --max-sessions: the third env is refused with a retry hint (a string, like every details value).
    with Client(server.address) as client:
        for _ in range(2):
            client.make("cpu/softmax_rows", backend="null")
        [refused] = exchange(server.address, [msgpack.packb({"v": 1, "id": 24, "op": "env.make",
                                                             "task": "cpu/softmax_rows", "backend": "null"})])
        assert refused["error"]["code"] == "OVERLOADED" and refused["error"]["details"]["retry_after_s"] == "10"
