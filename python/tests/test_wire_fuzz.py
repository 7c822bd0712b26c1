"""A request fuzzer against the real server process (the decoder alone is fuzzed with libFuzzer in
tests/fuzz/): the golden request fixtures, mutated (bit flips, cuts, splices, invalid UTF-8,
oversized lengths, deep nesting, huge arrays and maps), sent one by one over a raw DEALER socket.
After every input the server must answer it with a reply a strict msgpack decoder reads — carrying
the input's id whenever the input's top level holds one — and must still answer `health`; its
resident memory must stay within a bound. Seeded: a failure replays."""

from __future__ import annotations

import random
from pathlib import Path

import msgpack
import zmq

from kernelgym import Client

REPO = Path(__file__).resolve().parents[2]
INPUTS = 1500
RSS_BOUND_MB = 300  # growth over the server's resident memory after start


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def top_level_id(data: bytes) -> int:
    """The id the server should echo: a positive integer under "id" in a readable top-level map."""
    try:
        value = msgpack.unpackb(data, raw=True, strict_map_key=False)
    except Exception:
        return -1  # unreadable here; the server's scanner may still find one: not checked
    if isinstance(value, dict):
        got = value.get(b"id")
        return got if isinstance(got, int) and got > 0 and got < 2**64 else 0
    return 0


def mutations(rng: random.Random, seeds: list[bytes]):
    huge_array = msgpack.packb({"v": 1, "id": 7, "op": "env.step", "env": "e", "action": {"kind": "submit"},
                                "meta": {"tokens": list(range(70000))}})
    deep = b"\x81\xa1a" * 40 + b"\xc0"
    yield huge_array
    yield deep
    for _ in range(INPUTS):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(6)
            if kind == 0 and data:  # flip a bit
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            elif kind == 1 and data:  # cut
                del data[rng.randrange(len(data)):]
            elif kind == 2:  # splice in another seed's bytes
                other = rng.choice(seeds)
                at = rng.randrange(len(data) + 1)
                data[at:at] = other[rng.randrange(len(other) + 1):]
            elif kind == 3 and data:  # invalid UTF-8 somewhere
                i = rng.randrange(len(data))
                data[i:i + 1] = b"\xff\xfe"
            elif kind == 4 and data:  # a length byte made huge
                i = rng.randrange(len(data))
                data[i] = rng.choice([0xdc, 0xdd, 0xde, 0xdf, 0xdb, 0xda])
            else:  # a random byte inserted
                data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        yield bytes(data)


def test_mutated_requests_are_all_answered_and_the_server_keeps_serving(start_server):
    server = start_server("--local-runners", "0", "--null-backend")
    seeds = [p.read_bytes() for p in sorted((REPO / "tests/fixtures/protocol").glob("request_*.msgpack"))]
    assert seeds
    rng = random.Random(20261202)
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(server.address)
    try:
        with Client(server.address, timeout_s=10) as health:
            health.health()
            baseline = rss_mb(server.pid)
            for n, data in enumerate(mutations(rng, seeds)):
                socket.send(data)
                assert socket.poll(10000), f"input {n} got no reply: {data[:80]!r}"
                reply = msgpack.unpackb(socket.recv())  # strict: raises on invalid UTF-8
                assert isinstance(reply, dict) and reply.get("v") == 1 and isinstance(reply.get("id"), int), reply
                expected = top_level_id(data)
                if expected > 0:
                    assert reply["id"] == expected, (n, data[:80], reply)
                assert health.health()["status"] == "ok", f"the server stopped serving after input {n}"
            grown = rss_mb(server.pid) - baseline
            assert grown < RSS_BOUND_MB, f"resident memory grew by {grown:.0f} MB"
    finally:
        socket.close(linger=0)
        context.term()
