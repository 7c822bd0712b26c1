"""The Python client's overhead, side by side with the C++ client's, against one server in one run.

    build/python-venv/bin/python python/bench/bench_client.py [--n 20000] [--rounds 3] [--seconds 5]

Starts ``kernelgym serve --null-backend --local-runners 0`` (the server answers every evaluation
itself, at once), then, against that one server:

- sync no-op step round trip, p50 / p99: the C++ client (build/bench/kernelgym_bench_client, a
  child process) and the Python ``Client``, ``rounds`` times each, alternating, the same step
  sequence (one env, reset, each step replacing the source with one of two alternating sources, so
  after the first two it is the unchanged-evaluation path: a no-op step). Target: Python's p50
  at most 2x the C++ client's.
- throughput with 64 envs in flight from one Python process: ``send``/``recv`` (EnvPool style),
  and ``AsyncClient`` with 64 concurrent step loops. Target: >= 10,000 steps/s (send/recv).

Prints one JSON object (figures per round and their medians). Run by hand; the figures go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelgym import AsyncClient, Client
from kernelgym.protocol import replace

REPO = Path(__file__).resolve().parents[2]
TASK = "cpu/softmax_rows"
STEPS_PER_ENV = 10000  # the server's default limit on max_steps
SOURCES = (replace("// a\n"), replace("// b\n"))


def start_server(binary: Path, directory: Path) -> tuple[subprocess.Popen, str]:
    endpoint_file = directory / "endpoints.json"
    argv = [
        str(binary), "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind", "tcp://127.0.0.1:*",
        "--endpoint-file", str(endpoint_file), "--record-dir", str(directory / "store"),
        "--local-runners", "0", "--null-backend", "--max-sessions", "200000",
    ]  # fmt: skip
    with open(directory / "server.log", "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not endpoint_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the server did not start:\n{(directory / 'server.log').read_text()}")
        time.sleep(0.01)
    return process, json.loads(endpoint_file.read_text())["clients"]


def percentiles(us: list[float]) -> dict[str, float]:
    # The same estimator as the C++ side (bench/client_bench.cc): sorted[p * (n - 1)].
    s = sorted(us)
    return {"p50_us": s[int(0.5 * (len(s) - 1))], "p99_us": s[int(0.99 * (len(s) - 1))], "mean_us": statistics.fmean(s)}


def cpp_latency(binary: Path, address: str, n: int, warmup: int) -> dict[str, Any]:
    out = subprocess.run(
        [str(binary), "--connect", address, "-n", str(n), "--warmup", str(warmup)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def python_latency(address: str, n: int, warmup: int) -> dict[str, Any]:
    us: list[float] = []
    with Client(address, timeout_s=30) as c:
        env, left = "", 0
        for i in range(warmup + n):
            if left == 0:  # a fresh env when the step limit is near (untimed)
                if env:
                    c.close_env(env)
                env = c.make(TASK, backend="null", max_steps=STEPS_PER_ENV)["env"]
                c.reset(env, seed=1)
                left = STEPS_PER_ENV
            t0 = time.perf_counter_ns()
            c.step(env, SOURCES[i % 2])
            if i >= warmup:
                us.append((time.perf_counter_ns() - t0) / 1000)
            left -= 1
        c.close_env(env)
    return {"client": "python", "n": n, **percentiles(us)}


def make_envs(c: Client, count: int) -> list[str]:
    envs = [c.make(TASK, backend="null", max_steps=STEPS_PER_ENV)["env"] for _ in range(count)]
    for env in envs:
        c.reset(env, seed=1)
    return envs


def pipelined(address: str, envs_n: int, seconds: float) -> dict[str, Any]:
    """``envs_n`` envs, each with one step in flight; every reply is unwrapped (checked) and its env
    stepped again, until ``seconds`` pass."""
    with Client(address, timeout_s=30) as c:
        envs = make_envs(c, envs_n)
        left = dict.fromkeys(envs, STEPS_PER_ENV)
        in_flight: dict[int, str] = {}

        def send(env: str) -> None:
            left[env] -= 1
            in_flight[c.send("env.step", env=env, action=SOURCES[left[env] % 2])] = env

        for env in envs:
            send(env)
        steps = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while in_flight:
            reply = c.recv(timeout_s=30)
            assert reply is not None, "no reply within 30 s"
            env = in_flight.pop(reply.id)
            reply.unwrap()
            steps += 1
            if left[env] > 0 and time.perf_counter() < end:
                send(env)
        elapsed = time.perf_counter() - t0
        for env in envs:
            c.close_env(env)
    return {"envs": envs_n, "steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}


def concurrent(address: str, envs_n: int, seconds: float) -> dict[str, Any]:
    """AsyncClient: ``envs_n`` coroutines, each stepping its own env, until ``seconds`` pass."""

    async def run() -> dict[str, Any]:
        async with AsyncClient(address, timeout_s=30) as c:
            envs = [(await c.make(TASK, backend="null", max_steps=STEPS_PER_ENV))["env"] for _ in range(envs_n)]
            for env in envs:
                await c.reset(env, seed=1)
            end = time.perf_counter() + seconds

            async def loop(env: str) -> int:
                steps = 0
                while time.perf_counter() < end and steps < STEPS_PER_ENV:
                    await c.step(env, SOURCES[steps % 2])
                    steps += 1
                return steps

            t0 = time.perf_counter()
            steps = sum(await asyncio.gather(*(loop(env) for env in envs)))
            elapsed = time.perf_counter() - t0
            for env in envs:
                await c.close_env(env)
        return {"envs": envs_n, "steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--n", type=int, default=20000, help="timed sync steps per client and round")
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds per client, alternating")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per throughput measurement")
    parser.add_argument("--envs", type=int, default=64, help="envs in flight for the throughput")
    args = parser.parse_args()
    server_bin = Path(os.environ.get("KERNELGYM_BIN") or args.build_dir / "cli" / "kernelgym")
    cpp_bin = args.build_dir / "bench" / "kernelgym_bench_client"
    for binary in (server_bin, cpp_bin):
        if not binary.is_file():
            sys.exit(
                f"missing {binary}: build it (cmake --build {args.build_dir} --target kernelgym kernelgym_bench_client)"
            )

    with tempfile.TemporaryDirectory(prefix="kernelgym-bench-client-") as tmp:
        server, address = start_server(server_bin, Path(tmp))
        try:
            cpp, python = [], []
            for _ in range(args.rounds):
                cpp.append(cpp_latency(cpp_bin, address, args.n, args.warmup))
                python.append(python_latency(address, args.n, args.warmup))
            pipe = pipelined(address, args.envs, args.seconds)
            aio = concurrent(address, args.envs, args.seconds)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(90)

    cpp_p50 = statistics.median(r["p50_us"] for r in cpp)
    python_p50 = statistics.median(r["p50_us"] for r in python)
    report = {
        "latency_us": {
            "cpp_rounds": cpp,
            "python_rounds": python,
            "cpp_p50": cpp_p50,
            "cpp_p99": statistics.median(r["p99_us"] for r in cpp),
            "python_p50": python_p50,
            "python_p99": statistics.median(r["p99_us"] for r in python),
            "p50_ratio": python_p50 / cpp_p50,
        },
        "throughput": {"send_recv": pipe, "async_gather": aio},
        "targets": {
            "p50_ratio_at_most_2": python_p50 / cpp_p50 <= 2.0,
            "pipelined_at_least_10000_per_s": pipe["steps_per_s"] >= 10000,
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
