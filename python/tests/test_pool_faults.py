"""The runner pool under faults, from outside: real ``kernelgym serve`` and ``kernelgym runner``
processes, real SIGKILL / SIGSTOP, the cpu backend (a real compile and run per evaluation).

- A runner frozen mid-evaluation while its server is killed and restarted on the same endpoints:
  its late result names the old server's instance, so the new server never credits it to its own
  job of the same id (job ids restart at 1 in every server process).
- Runners that fall silent one after the other while idle live runners are connected: the step is
  re-dispatched to a live runner and succeeds, never RUNNER_LOST.
- A client with a request in flight when the server restarts: the request fails with
  ServerRestarted within seconds (not at its timeout), and a request naming an env of the old
  process is answered ServerRestarted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Server, launch, server_binary

from kernelgym import Client
from kernelgym.errors import Overloaded, ServerRestarted, UnknownBackend
from kernelgym.protocol import submit


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts (servers, runners); killed (and continued first) at its end."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
            p.wait()


def start_runner(processes: list[subprocess.Popen], endpoint: str, log: Path, backend: str = "cpu") -> subprocess.Popen:
    with open(log, "ab") as out:
        p = subprocess.Popen([str(server_binary()), "runner", "--connect", endpoint, "--backend", backend],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    processes.append(p)
    return p


def start_server(processes: list[subprocess.Popen], directory: Path, *flags: str, **endpoints: str) -> Server:
    s = launch(directory, "--local-runners", "0", *flags, **endpoints)
    processes.append(s.process)
    return s


def cpu_runners(c: Client) -> int:
    return c.health()["runners"].get("cpu", 0)


def test_a_result_from_before_a_server_restart_is_never_credited_to_a_new_job(tmp_path, processes):
    first = start_server(processes, tmp_path / "first")
    runner = start_runner(processes, first.runners_address, tmp_path / "runner.log")
    with Client(first.address, timeout_s=60) as c:
        wait_for(lambda: cpu_runners(c) == 1, 60, "the runner to join")
        softmax = c.make("cpu/softmax_rows")
        c.send("env.reset", env=softmax["env"], seed=1)  # job 1 of the first server
        wait_for(lambda: c.stats()["scheduler"]["running"] == 1, 30, "job 1 to reach the runner")
    # The runner freezes mid-evaluation; the server dies and another takes its endpoints.
    runner.send_signal(signal.SIGSTOP)
    first.process.kill()
    first.process.wait()
    second = start_server(processes, tmp_path / "second", bind=first.address, runner_bind=first.runners_address)
    with Client(second.address, timeout_s=120) as c:
        silu = c.make("cpu/silu_mul")
        reset = c.send("env.reset", env=silu["env"], seed=1)  # job 1 of the second server
        wait_for(lambda: c.stats()["scheduler"]["queued"].get("cpu") == 1, 30, "job 1 to queue")
        runner.send_signal(signal.SIGCONT)  # it finishes the first server's job 1, then takes ours
        reply = c.recv(timeout_s=120)
        assert reply is not None and reply.id == reset, "no reply to the reset"
        observation = reply.unwrap()["observation"]
        # The silu_mul starter is a correct kernel: "ok", judged against silu_mul's reference.
        assert observation["status"] == "ok", observation["message"]
        report = json.dumps(observation["report"])
        assert "silu_mul" in report and "softmax" not in report, report[:2000]
        stale = c.stats()["scheduler"]["stale_results"]
    assert stale.get("other_instance") == 1, stale


def test_a_step_is_not_lost_while_live_runners_are_idle(tmp_path, processes):
    # Heartbeats every 0.5 s, a runner silent for 3 s is dropped, at most 3 runners lost per job.
    s = start_server(processes, tmp_path / "server", "--heartbeat", "0.5", "--runner-timeout", "3")
    victims = []
    with Client(s.address, timeout_s=120) as c:
        # The victims join first: ties between idle runners go to the earliest connection.
        for i in range(3):
            victims.append(start_runner(processes, s.runners_address, tmp_path / f"victim{i}.log"))
            wait_for(lambda n=i + 1: cpu_runners(c) == n, 60, f"victim {i} to join")
        for i in range(3):
            start_runner(processes, s.runners_address, tmp_path / f"live{i}.log")
        wait_for(lambda: cpu_runners(c) == 6, 60, "the live runners to join")
        env = c.make("cpu/softmax_rows")["env"]
        # The victims freeze one after the other, 0.7 s apart, and the reset comes right after the
        # last: each victim is dropped 0.7 s after the one before, while the three live runners
        # stay idle. Sending the job to whichever idle runner comes first would lose it three
        # times (RUNNER_LOST after ~4.5 s).
        for i, victim in enumerate(victims):
            if i:
                time.sleep(0.7)  # fault pacing, not synchronization
            victim.send_signal(signal.SIGSTOP)
        observation = c.reset(env, seed=1)["observation"]
        stats = c.stats()["scheduler"]
    assert observation["status"] == "ok", observation["message"]
    assert stats["lost"] == 0, stats


def test_a_client_learns_of_a_server_restart_at_once(tmp_path, processes):
    # No runner: a cpu reset waits in the queue (up to --no-runner-wait) and is in flight when the
    # server dies.
    first = start_server(processes, tmp_path / "first", "--no-runner-wait", "600")
    with Client(first.address, timeout_s=120, backoff_max_s=0.5) as c:
        env = c.make("cpu/softmax_rows")["env"]
        assert c.server_instance and env.startswith(f"env-{c.server_instance}-")
        before = c.server_instance
        pipelined = c.send("env.reset", env=env, seed=1)
        restarted: list[Server] = []

        def restart() -> None:
            time.sleep(0.5)  # the sync reset below is waiting by now (fault pacing)
            first.process.kill()
            first.process.wait()
            restarted.append(start_server(processes, tmp_path / "second", "--no-runner-wait", "600",
                                          bind=first.address, runner_bind=first.runners_address))

        other = c.make("cpu/silu_mul")["env"]
        killer = threading.Thread(target=restart)
        killer.start()
        began = time.monotonic()
        with pytest.raises(ServerRestarted) as raised:
            c.reset(other, seed=1)  # sync, in flight when the server dies
        waited = time.monotonic() - began
        killer.join()
        assert waited < 30, f"the restart was noticed after {waited:.1f} s"
        assert raised.value.details["previous_instance"] == before
        assert c.server_instance == raised.value.details["instance"] != before
        # The pipelined reset failed at the same moment, and is handed to recv().
        reply = c.recv(timeout_s=0)
        assert reply is not None and reply.id == pipelined
        assert isinstance(reply.error, ServerRestarted)
        # The new server names the restart for an env of the old one.
        with pytest.raises(ServerRestarted, match="was made by server instance"):
            c.step(env, submit())
    assert restarted and restarted[0].process.poll() is None


def test_null_is_refused_without_the_flag_even_when_a_runner_serves_it(tmp_path, processes):
    s = start_server(processes, tmp_path / "server")
    start_runner(processes, s.runners_address, tmp_path / "runner.log", backend="null")
    with Client(s.address, timeout_s=30) as c:
        wait_for(lambda: len(c.stats()["scheduler"]["runners"]) == 1, 60, "the null runner to join")
        with pytest.raises(UnknownBackend):
            c.make("cpu/softmax_rows", backend="null")
        assert "null" not in c.health()["runners"]
        assert "null" not in c.hello()["backends"]


def test_metrics_in_the_prometheus_format_and_the_memory_bound(tmp_path, processes):
    # A 1-byte heap bound: the server is past it from the start, so env.make is refused.
    s = start_server(processes, tmp_path / "server", "--null-backend", "--metrics-bind", "tcp://127.0.0.1:*",
                     "--max-heap-bytes", "1")
    metrics = json.loads((s.dir / "endpoints.json").read_text())["metrics"].replace("tcp://", "http://")
    with Client(s.address, timeout_s=30) as c:
        with pytest.raises(Overloaded) as refused:
            c.make("cpu/softmax_rows", backend="null")
        assert refused.value.details["reason"] == "memory"
        memory = c.stats()["memory"]
        assert memory["refused"] == 1 and memory["heap_bytes"] > 0
    with urllib.request.urlopen(metrics + "/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    assert "kernelgym_up 1\n" in text
    assert '# TYPE kernelgym_job_seconds histogram' in text
    assert 'kernelgym_errors_total{code="OVERLOADED"} 1\n' in text
    assert 'kernelgym_requests_total{op="env.make"} 1\n' in text


def test_an_async_client_fails_its_calls_in_flight_when_it_sees_a_new_instance(tmp_path, processes):
    import asyncio

    from kernelgym import AsyncClient

    first = start_server(processes, tmp_path / "first", "--no-runner-wait", "600")

    async def scenario() -> None:
        async with AsyncClient(first.address, timeout_s=60, backoff_max_s=0.5) as c:
            env = (await c.make("cpu/softmax_rows"))["env"]
            before = c.server_instance
            reset = asyncio.ensure_future(c.reset(env, seed=1))  # waits for a runner: there is none
            await asyncio.sleep(0.3)
            first.process.kill()
            first.process.wait()
            start_server(processes, tmp_path / "second", bind=first.address, runner_bind=first.runners_address)
            # The AsyncClient does not probe: its next health reply names the new instance.
            health = await c.health()
            assert health["instance"] != before and c.server_instance == health["instance"]
            with pytest.raises(ServerRestarted) as raised:
                await asyncio.wait_for(reset, 5)
            assert raised.value.details["previous_instance"] == before

    asyncio.run(scenario())
