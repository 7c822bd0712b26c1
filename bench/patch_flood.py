#!/usr/bin/env python3
"""Does a flood of `patch` steps slow other clients? Health latency of one client, alone and while
another keeps --in-flight patch steps going (null backend: the server answers each step itself,
so what is measured is the server's loop, and GNU patch).

    python3 bench/patch_flood.py [--seconds 5] [--in-flight 16] [--kernelgym build/cli/kernelgym]

Prints health latency p50/p99 (ms) without and with the flood, in one run, and the flood's patch
steps/s. Needs the kernelgym Python package (`pip install ./python`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import kernelgym
from kernelgym import Client, protocol

REPO = Path(__file__).resolve().parents[1]
TASK = "cpu/softmax_rows"


def health_latencies(address: str, seconds: float) -> list[float]:
    out = []
    with Client(address) as client:
        client.health()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            client.health()
            out.append((time.perf_counter() - start) * 1000)
            time.sleep(0.002)
    return out


def flood(address: str, in_flight: int, stop: threading.Event, counter: list[int]) -> None:
    """Keeps `in_flight` envs each with a patch step outstanding: a diff that flips one line back
    and forth, so every step runs GNU patch."""
    with Client(address) as client:
        envs = []
        for _ in range(in_flight):
            env = client.make(TASK, backend="null", max_steps=10000)["env"]
            client.reset(env, seed=1)
            envs.append(env)
        source = client.step(envs[0], protocol.replace("int a = 0;\n"))["observation"]["source"]
        for env in envs[1:]:
            client.step(env, protocol.replace(source))
        diffs = ["@@ -1 +1 @@\n-int a = 0;\n+int a = 1;\n", "@@ -1 +1 @@\n-int a = 1;\n+int a = 0;\n"]
        state = {}
        for i, env in enumerate(envs):
            state[client.send("env.step", env=env, action={"kind": "patch", "diff": diffs[0]}, meta={})] = (env, 1)
        while not stop.is_set():
            reply = client.recv(timeout_s=10)
            if reply is None:
                break
            env, flip = state.pop(reply.id)
            reply.unwrap()
            counter[0] += 1
            state[client.send("env.step", env=env, action={"kind": "patch", "diff": diffs[flip]}, meta={})] = (env, 1 - flip)
        while client.outstanding():
            client.recv(timeout_s=10)


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        endpoint_file = Path(tmp) / "endpoints.json"
        server = subprocess.Popen([args.kernelgym, "serve", "--bind", "tcp://127.0.0.1:*", "--local-runners", "0",
                                   "--null-backend", "--endpoint-file", str(endpoint_file)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not endpoint_file.exists():
                time.sleep(0.05)
            address = json.loads(endpoint_file.read_text())["clients"]
            alone = health_latencies(address, args.seconds)
            stop, counter = threading.Event(), [0]
            flooder = threading.Thread(target=flood, args=(address, args.in_flight, stop, counter))
            flooder.start()
            time.sleep(1)  # the flood under way
            start_count, start = counter[0], time.monotonic()
            flooded = health_latencies(address, args.seconds)
            rate = (counter[0] - start_count) / (time.monotonic() - start)
            stop.set()
            flooder.join()
        finally:
            server.terminate()
            server.wait()
    for name, values in (("alone", alone), (f"with {args.in_flight} patch steps in flight", flooded)):
        print(f"health latency {name}: p50 {statistics.median(values):.2f} ms, p99 {percentile(values, 0.99):.2f} ms "
              f"({len(values)} calls)")
    print(f"patch steps/s during the flood: {rate:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
