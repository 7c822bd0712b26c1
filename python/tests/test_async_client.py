"""AsyncClient: many concurrent calls on one client, matched by id; the same errors, timeouts and
retries as the sync Client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_server import FakeServer, reply_bytes

from kernelgym import AsyncClient, errors
from kernelgym.protocol import replace, submit

TASK = "cpu/softmax_rows"
HELLO = json.loads((Path(__file__).resolve().parents[2] / "tests/fixtures/protocol/reply_hello.json").read_text())[
    "result"
]


def test_32_envs_stepped_concurrently_with_gather(server):
    async def episode(c: AsyncClient, k: int) -> list[int]:
        env = (await c.make(TASK, backend="null", max_steps=10))["env"]
        seen = [(await c.reset(env, seed=k))["observation"]["step"]]
        for i in range(1, 4):
            result = await c.step(env, replace(f"// env {k} step {i}\n"))
            assert result["observation"]["source"] == f"// env {k} step {i}\n"
            seen.append(result["observation"]["step"])
        fork = await c.fork(env)
        await c.close_env(env)
        await c.close_env(fork["env"])
        return seen

    async def main() -> None:
        async with AsyncClient(server.address, timeout_s=60) as c:
            results = await asyncio.gather(*(episode(c, k) for k in range(32)), c.hello(), c.list_tasks("cpu"))
            assert results[:32] == [[0, 1, 2, 3]] * 32
            assert results[32]["protocol"] == 1
            assert TASK in {t["id"] for t in results[33]}
            assert c.outstanding() == 0 and c.stray_replies == 0

    asyncio.run(main())


def test_error_replies_raise_their_type(server):
    async def main() -> None:
        async with AsyncClient(server.address, timeout_s=60) as c:
            unknown, over, task = await asyncio.gather(
                c.step("env-0000", submit()),
                c.make(TASK, backend="null"),
                c.get_task("cpu/no_such_task"),
                return_exceptions=True,
            )
            assert isinstance(unknown, errors.UnknownEnv) and unknown.op == "env.step"
            assert isinstance(task, errors.UnknownTask) and task.details["task"] == "cpu/no_such_task"
            env = over["env"]
            with pytest.raises(errors.EpisodeOver):
                await c.step(env, submit())
            await c.close_env(env)

    asyncio.run(main())


def test_a_step_without_reply_is_a_transport_error_and_is_never_resent():
    async def main(address: str) -> None:
        async with AsyncClient(address, timeout_s=0.2, backoff_initial_s=0.01) as c:
            with pytest.raises(errors.TransportError, match="not retried"):
                await c.step("env-1", submit())
            assert c.outstanding() == 0

    with FakeServer() as fake:
        asyncio.run(main(fake.address))
        _, request = fake.next_request()
        assert request["op"] == "env.step"
        assert fake.received.empty()


def test_hello_is_retried_on_a_fresh_socket_and_late_replies_are_dropped():
    connections: list[bytes] = []

    def handler(routing_id, request):
        connections.append(routing_id)
        if len(connections) != 3:
            return None
        return [(connections[0], reply_bytes(1, HELLO)), reply_bytes(request["id"], HELLO)]  # first one late

    async def main(address: str) -> None:
        async with AsyncClient(address, timeout_s=0.5, backoff_initial_s=0.01, backoff_max_s=0.05) as c:
            assert await c.hello() == HELLO
            assert c.stray_replies == 0

    with FakeServer(handler) as fake:
        asyncio.run(main(fake.address))
    assert len(connections) >= 3 and len(set(connections)) == len(connections)


def test_a_malformed_reply_is_a_protocol_error():
    def handler(routing_id, request):
        return [reply_bytes(request["id"], {"protocol": "one"})]

    async def main(address: str) -> None:
        async with AsyncClient(address, timeout_s=10) as c:
            with pytest.raises(errors.ProtocolError, match="field 'protocol' must be an integer, not a string"):
                await c.hello()

    with FakeServer(handler) as fake:
        asyncio.run(main(fake.address))


def test_closing_fails_the_calls_still_waiting():
    async def main(address: str) -> None:
        c = AsyncClient(address, timeout_s=30)
        waiting = asyncio.ensure_future(c.step("env-1", submit()))
        while c.outstanding() == 0:  # until the request is out
            await asyncio.sleep(0)
        await c.close()
        with pytest.raises(errors.TransportError, match="closed"):
            await waiting
        with pytest.raises(errors.TransportError, match="closed"):
            await c.hello()

    with FakeServer() as fake:
        asyncio.run(main(fake.address))
