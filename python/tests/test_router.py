"""Router (kernelgym.router) against real servers: placement by health, every call of an env to
its own server, fail-over of new envs past a dead, draining or full server, round robin where
``health`` is not answered (stand-in servers), and ``kernelgym.make`` with several addresses."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Any

import msgpack
import pytest

import kernelgym
from kernelgym import Client, Router
from kernelgym.errors import Overloaded, TransportError, UnknownEnv
from kernelgym.protocol import replace, submit

from conftest import server_binary
from fake_server import FakeServer, reply_bytes

TASK = "cpu/softmax_rows"
NULL = ["--local-runners", "0", "--null-backend"]


def sessions(address: str) -> int:
    with Client(address, timeout_s=10) as c:
        return c.health()["sessions"]


def fill(address: str, n: int) -> Client:
    """n envs on the server at ``address``, made by another client (kept open by it)."""
    c = Client(address, timeout_s=10)
    for _ in range(n):
        c.make(TASK, backend="null")
    return c


def test_health_answers_the_documented_fields(server):
    with Client(server.address, timeout_s=10) as c:
        h = c.health()
    assert h["status"] == "ok"
    assert h["uptime_s"] >= 0
    assert isinstance(h["sessions"], int) and h["runners"] == {}  # the null backend has no runners
    assert h["queued"] == 0 and h["running"] == 0


def test_new_envs_go_to_the_least_loaded_server_and_stay_there(start_server):
    a, b = start_server(*NULL), start_server(*NULL)
    other = fill(a.address, 3)
    try:
        with Router([a.address, b.address], timeout_s=10) as router:
            made = [router.make(TASK, backend="null")["env"] for _ in range(5)]
            where = [router.address_of(e) for e in made]
            # b had 0 sessions, a 3: the first three go to b, then they take turns (3-3, 4-3).
            assert where[:3] == [b.address] * 3
            assert sorted(where[3:]) == sorted([a.address, b.address])
            assert sessions(a.address) == 3 + where.count(a.address)
            assert sessions(b.address) == where.count(b.address)
            # Every call for an env goes to its server: the other server does not know the id.
            for env in made:
                assert router.reset(env, seed=1)["observation"]["step"] == 0
                step = router.step(env, replace("// v2\n"))
                assert step["observation"]["step"] == 1
            fork = router.fork(made[0])
            assert router.address_of(fork["env"]) == where[0]
            assert router.step(fork["env"], submit())["terminated"] is True
            for env in [*made, fork["env"]]:
                router.close_env(env)
            assert router.envs() == {}
            assert sessions(b.address) == 0 and sessions(a.address) == 3
    finally:
        other.close()


def test_an_env_the_router_did_not_make_is_unknown_without_a_request(start_server):
    a = start_server(*NULL)
    with Router([a.address], timeout_s=10) as router:
        with pytest.raises(UnknownEnv):
            router.step("env-123", submit())


def test_a_dead_server_gets_no_new_envs_and_its_envs_raise_transport_error(start_server):
    a, b = start_server(*NULL), start_server(*NULL)
    with Router([a.address, b.address], timeout_s=2, health_timeout_s=0.5, health_ttl_s=0) as router:
        on_a = router.make(TASK, backend="null")["env"]
        on_b = router.make(TASK, backend="null")["env"]
        assert {router.address_of(on_a), router.address_of(on_b)} == {a.address, b.address}
        if router.address_of(on_a) != a.address:
            on_a, on_b = on_b, on_a
        router.reset(on_b, seed=3)
        b.process.send_signal(signal.SIGKILL)
        b.process.wait()
        # New envs fail over to a; b is left out of placement.
        for _ in range(3):
            env = router.make(TASK, backend="null")["env"]
            assert router.address_of(env) == a.address
        assert router.servers[b.address].status == "unreachable"
        # The env that lived on b is not moved: its episode died with b.
        with pytest.raises(TransportError):
            router.step(on_b, submit())
        router.reset(on_a, seed=4)  # a's envs are unaffected
        assert router.step(on_a, submit())["terminated"] is True


def test_with_every_server_down_make_raises_transport_error(start_server):
    a = start_server(*NULL)
    a.process.send_signal(signal.SIGKILL)
    a.process.wait()
    with Router([a.address], timeout_s=0.5, health_timeout_s=0.2) as router:
        with pytest.raises(TransportError, match="no server took the env"):
            router.make(TASK, backend="null")


def test_a_draining_server_gets_no_new_envs(start_server):
    # c drains: SIGTERM with a reset in flight that no runner will take (cpu, no local runner).
    a, c = start_server(*NULL), start_server("--local-runners", "0", "--null-backend", "--drain-timeout", "20")
    with Client(c.address, timeout_s=10) as busy:
        made = busy.make(TASK, backend="cpu")
        busy.send("env.reset", env=made["env"], seed=1)
        # The reset must be in the server before the signal: with nothing in flight a draining
        # server stops at once (a loaded machine can deliver SIGTERM before the reset is read).
        deadline = time.monotonic() + 10
        while busy.stats()["pending"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        c.process.send_signal(signal.SIGTERM)
        with Client(c.address, timeout_s=10) as probe:
            deadline = time.monotonic() + 10
            while probe.health()["status"] != "draining":  # the loop notices the signal within 50 ms
                assert time.monotonic() < deadline
                time.sleep(0.02)
        with Router([c.address, a.address], timeout_s=10, health_ttl_s=0) as router:
            for _ in range(3):
                assert router.address_of(router.make(TASK, backend="null")["env"]) == a.address
            assert router.servers[c.address].status == "draining"
        c.process.kill()
        c.process.wait()


def test_a_full_server_is_skipped_for_the_next(start_server):
    a, b = start_server(*NULL, "--max-sessions", "1"), start_server(*NULL)
    others = [fill(a.address, 1), fill(b.address, 2)]
    try:
        # a is the least loaded (1 < 2) but full: OVERLOADED, so the env goes to b.
        with Router([a.address, b.address], timeout_s=10, health_ttl_s=0) as router:
            assert router.placement()[0] == a.address
            assert router.address_of(router.make(TASK, backend="null")["env"]) == b.address
        with Router([a.address], timeout_s=10) as only_a:
            with pytest.raises(Overloaded):
                only_a.make(TASK, backend="null")
    finally:
        for o in others:
            o.close()


def _older_server(made: list[str]):
    """A stand-in for a server without `health`: UNKNOWN_OP for it, an env for every env.make."""

    def handle(routing_id: bytes, request: dict[str, Any]) -> list[bytes]:
        if request["op"] == "health":
            error = {"code": "UNKNOWN_OP", "message": "unknown op 'health'", "details": {"op": "health"}}
            return [msgpack.packb({"v": 1, "id": request["id"], "ok": False, "error": error})]
        env = f"env-{len(made)}-{id(made)}"
        made.append(env)
        info = {"env": env, "task": TASK, "backend": "null", "reward": "log_speedup_gain", "reward_min": -1.0,
                "reward_max": 1.0, "max_steps": 4, "time_budget_s": 60.0, "record": False}  # fmt: skip
        return [reply_bytes(request["id"], info)]

    return FakeServer(handle)


def test_round_robin_when_health_is_not_answered():
    made_a: list[str] = []
    made_b: list[str] = []
    with _older_server(made_a) as a, _older_server(made_b) as b:
        with Router([a.address, b.address], timeout_s=5) as router:
            where = [router.address_of(router.make(TASK, backend="null")["env"]) for _ in range(6)]
        assert where.count(a.address) == 3 and where.count(b.address) == 3
        assert all(x != y for x, y in zip(where, where[1:]))  # they take turns
        assert router.servers[a.address].status == "no health"
        assert len(made_a) == 3 and len(made_b) == 3


def test_make_with_several_addresses_places_the_env_through_a_router(start_server):
    a, b = start_server(*NULL), start_server(*NULL)
    other = fill(a.address, 2)
    try:
        env = kernelgym.make(TASK, backend="null", address=[a.address, b.address], max_steps=4)
        try:
            assert isinstance(env.client, Router)
            assert env.client.address_of(env.env_id) == b.address
            obs, info = env.reset(seed=5)
            assert obs["step"] == 0
            obs, reward, terminated, truncated, info = env.step(replace("// x\n"))
            assert obs["step"] == 1
            twin = env.fork()
            assert env.client.address_of(twin.env_id) == b.address
            twin.close()
            assert env.spec.kwargs["address"] == [a.address, b.address]
        finally:
            env.close()
        assert sessions(b.address) == 0
    finally:
        other.close()


def test_curve_servers_each_with_its_own_key(tmp_path, start_server, monkeypatch):
    """Servers with different CURVE keys: the router gives each its own server key; one whose
    allow-list lacks this client refuses the handshake and gets no env."""
    monkeypatch.delenv("KERNELGYM_SERVER_KEY", raising=False)
    monkeypatch.delenv("KERNELGYM_CLIENT_KEY", raising=False)
    keys = tmp_path / "keys"
    for name in ("a", "b", "c", "alice", "bob"):
        subprocess.run([str(server_binary()), "keys", "generate", "--out", str(keys / name)], check=True,
                       capture_output=True)  # fmt: skip
    servers = {}
    for name, allowed in (("a", "alice"), ("b", "alice"), ("c", "bob")):
        servers[name] = start_server(*NULL, "--server-key", str(keys / f"{name}.key"),
                                     "--allow-clients", str(keys / f"{allowed}.pub"))  # fmt: skip
    addresses = {s.address: str(keys / f"{name}.pub") for name, s in servers.items()}
    with Router(list(addresses), timeout_s=10, health_ttl_s=0, server_key=addresses,
                client_key=str(keys / "alice.key")) as router:  # fmt: skip
        where = {router.address_of(router.make(TASK, backend="null")["env"]) for _ in range(4)}
        assert where == {servers["a"].address, servers["b"].address}
        assert router.servers[servers["c"].address].status == "unreachable"
