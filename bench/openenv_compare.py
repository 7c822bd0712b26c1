#!/usr/bin/env python3
"""The same no-op step three ways, side by side in one run: kernelgym's own protocol, an OpenEnv
environment server (openenv-core), and kernelgym served through OpenEnv (kernelgym.adapters.openenv).

    python3 bench/openenv_compare.py [--steps 2000] [--sessions 8] [--rounds 3] [--kernelgym build/cli/kernelgym]

  kernelgym        the Python client (ZeroMQ + msgpack) to `kernelgym serve --null-backend`: a
                   replace step with the current source (the server's no-op path)
  openenv echo     OpenEnv's GenericEnvClient (WebSocket + JSON) to OpenEnv's server (FastAPI under
                   uvicorn, in its own process) hosting an Environment whose step returns at once
  openenv bridge   the same OpenEnv client and server hosting KernelGymEnvironment: each step goes
                   on to the kernelgym server as in the first row

For each: the latency of sequential steps on one session (p50, p99) and the throughput of
--sessions sessions stepping at once (asyncio, one connection each). Rounds alternate the three
ways; the medians over rounds are printed. Needs `pip install ./python openenv-core uvicorn`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from openenv.core import GenericEnvClient

from kernelgym import AsyncClient, Client

from local_server import served

SOURCE = "void kernel(const float* x, float* y, int64_t R, int64_t C) {}\n"

ECHO_APP = '''
from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app

class EchoAction(Action):
    source: str = ""

class EchoObservation(Observation):
    status: str = "ok"

class Echo(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def __init__(self):
        super().__init__()
        self._state = State()
    def reset(self, seed=None, episode_id=None, **kwargs):
        return EchoObservation()
    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        return EchoObservation(reward=0.0)
    @property
    def state(self):
        return self._state

app = create_fastapi_app(Echo, EchoAction, EchoObservation, max_concurrent_envs=256)
'''

BRIDGE_APP = '''
import os
from kernelgym.adapters.openenv import create_kernelgym_app
app = create_kernelgym_app("cpu/softmax_rows", os.environ["KERNELGYM_ADDRESS"], backend="null", max_steps=10000, max_concurrent_envs=256)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Uvicorn:
    """An OpenEnv app in a uvicorn process of its own (as OpenEnv deploys one)."""

    def __init__(self, module_dir: Path, module: str, env: dict[str, str]):
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "uvicorn", f"{module}:app", "--port", str(self.port),
                                         "--log-level", "warning"], cwd=module_dir, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{self.url}/health", timeout=1).ok:
                    return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"uvicorn {module} did not start")
            time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return ordered[len(ordered) // 2] * 1e6, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6


def kernelgym_latency(address: str, steps: int) -> list[float]:
    with Client(address) as client:
        env = client.make("cpu/softmax_rows", backend="null", max_steps=10000)["env"]
        client.reset(env, seed=1)
        action = {"kind": "replace", "source": SOURCE}
        client.step(env, action)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            client.step(env, action)
            times.append(time.perf_counter() - t)
        client.close_env(env)
        return times


async def kernelgym_throughput(address: str, sessions: int, steps: int) -> float:
    async with AsyncClient(address) as client:
        envs = [(await client.make("cpu/softmax_rows", backend="null", max_steps=10000))["env"] for _ in range(sessions)]
        action = {"kind": "replace", "source": SOURCE}
        for env in envs:
            await client.reset(env, seed=1)
            await client.step(env, action)

        async def run(env: str) -> None:
            for _ in range(steps):
                await client.step(env, action)

        t = time.perf_counter()
        await asyncio.gather(*(run(env) for env in envs))
        elapsed = time.perf_counter() - t
        for env in envs:
            await client.close_env(env)
        return sessions * steps / elapsed


def openenv_latency(url: str, steps: int, action: dict) -> list[float]:
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(seed=1)
        env.step(action)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            env.step(action)
            times.append(time.perf_counter() - t)
        return times


async def openenv_throughput(url: str, sessions: int, steps: int, action: dict) -> float:
    clients = [GenericEnvClient(base_url=url) for _ in range(sessions)]
    for c in clients:
        await c.connect()
        await c.reset(seed=1)
        await c.step(action)

    async def run(c: GenericEnvClient) -> None:
        for _ in range(steps):
            await c.step(action)

    t = time.perf_counter()
    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - t
    for c in clients:
        await c.close()
    return sessions * steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kernelgym", default=str(Path(__file__).resolve().parents[1] / "build/cli/kernelgym"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, served(args.kernelgym, Path(tmp), 0, "--null-backend") as address:
        (Path(tmp) / "echo_app.py").write_text(ECHO_APP)
        (Path(tmp) / "bridge_app.py").write_text(BRIDGE_APP)
        env = dict(os.environ, KERNELGYM_ADDRESS=address)
        echo, bridge = Uvicorn(Path(tmp), "echo_app", env), Uvicorn(Path(tmp), "bridge_app", env)
        rows: dict[str, dict[str, list[float]]] = {name: {"p50": [], "p99": [], "tput": []}
                                                   for name in ("kernelgym", "openenv echo", "openenv bridge")}
        per_session = max(1, args.steps // args.sessions)
        try:
            for _ in range(args.rounds):
                for name in rows:
                    if name == "kernelgym":
                        times = kernelgym_latency(address, args.steps)
                        tput = asyncio.run(kernelgym_throughput(address, args.sessions, per_session))
                    elif name == "openenv echo":
                        times = openenv_latency(echo.url, args.steps, {"source": SOURCE})
                        tput = asyncio.run(openenv_throughput(echo.url, args.sessions, per_session, {"source": SOURCE}))
                    else:
                        times = openenv_latency(bridge.url, args.steps, {"kind": "replace", "source": SOURCE})
                        tput = asyncio.run(openenv_throughput(bridge.url, args.sessions, per_session,
                                                              {"kind": "replace", "source": SOURCE}))
                    p50, p99 = percentiles(times)
                    rows[name]["p50"].append(p50)
                    rows[name]["p99"].append(p99)
                    rows[name]["tput"].append(tput)
        finally:
            echo.stop()
            bridge.stop()
    base = statistics.median(rows["kernelgym"]["p50"])
    print(f"| way | step p50 (us) | p99 (us) | p50 / kernelgym's | steps/s, {args.sessions} sessions at once |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        p50 = statistics.median(r["p50"])
        print(f"| {name} | {p50:.0f} | {statistics.median(r['p99']):.0f} | {p50 / base:.2f} | "
              f"{statistics.median(r['tput']):.0f} |")


if __name__ == "__main__":
    main()
