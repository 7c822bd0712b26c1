#!/usr/bin/env python3
"""The runner pool at scale and under faults: one `kernelgym serve`, N `kernelgym runner` processes
on this machine, E envs stepping through C client processes.

    python3 bench/pool_bench.py scale  [--runners 1,4,16] [--envs 64] [--clients 2] [--seconds 10]
    python3 bench/pool_bench.py faults [--runners 4] [--envs 64] [--clients 2] [--seconds 24]
    python3 bench/pool_bench.py memory [--envs 2000] [--steps 16]
    (both: [--kernelgym build/cli/kernelgym] [--json FILE])

Evaluations use the `null` backend on the runners (`serve --null-backend-runners`, `runner
--backend null`): every step is a real job through the scheduler, a runner's DEALER and back, but
judges nothing, so what is measured is the pool (server loop, scheduler, runner host) and not a
compiler. Every step has a source of its own, so the episode's evaluation cache never answers it.

scale: for each N, the steps/s (= runner jobs/s) over --seconds after a warm-up, client-side
latency p50/p99 (send to reply, one step in flight per env), and the CPU seconds the server and the
runners used per job (/proc/PID/stat).

faults: one run of --seconds with faults at fixed times: at 20% SIGKILL one runner, at 35% SIGSTOP
another (SIGCONT at 60%), at 70% SIGKILL the server and start a new one on the same endpoints (the
runners reconnect by themselves). Every step sent is accounted for: answered ok, answered with an
observation saying RUNNER_LOST, answered with an error (by code: SERVER_RESTARTED for the steps in
flight at the restart and for envs of the old server, which the client then re-makes), or never
answered (within 60 s after the end). For each fault: the longest gap between two successful
replies after it.

Needs the kernelgym Python package (`pip install ./python`); everything else is the standard library.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASK = "cpu/softmax_rows"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its threads included), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


class Pool:
    """A server and its runners, all local processes."""

    def __init__(self, binary: str, directory: Path, runners: int, runner_log_level: str = "warn") -> None:
        self.binary = binary
        self.runner_log_level = runner_log_level
        self.directory = directory
        self.runners: list[subprocess.Popen] = []
        self.server: subprocess.Popen | None = None
        self.address = self.runners_address = ""
        self.start_server("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
        for _ in range(runners):
            self.start_runner()

    def start_server(self, bind: str, runner_bind: str) -> None:
        endpoint_file = self.directory / "endpoints.json"
        endpoint_file.unlink(missing_ok=True)
        log = open(self.directory / "server.log", "ab")
        self.server = subprocess.Popen(
            [self.binary, "--log-level", "warn", "serve", "--bind", bind, "--runner-bind", runner_bind,
             "--endpoint-file", str(endpoint_file), "--record-dir", str(self.directory / "store"),
             "--local-runners", "0", "--null-backend-runners", "--heartbeat", "0.5", "--runner-timeout", "3"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not endpoint_file.exists():
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start; see {self.directory / 'server.log'}")
            time.sleep(0.02)
        endpoints = json.loads(endpoint_file.read_text())
        self.address, self.runners_address = endpoints["clients"], endpoints["runners"]

    def start_runner(self) -> None:
        log = open(self.directory / f"runner{len(self.runners)}.log", "ab")
        self.runners.append(subprocess.Popen(
            [self.binary, "--log-level", self.runner_log_level, "runner", "--connect", self.runners_address,
             "--backend", "null"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))

    def wait_for_runners(self, n: int, timeout_s: float = 60) -> None:
        from kernelgym import Client
        with Client(self.address, timeout_s=10) as c:
            deadline = time.monotonic() + timeout_s
            while c.health()["runners"].get("null", 0) != n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{n} runners did not join")
                time.sleep(0.05)

    def stats(self) -> dict:
        from kernelgym import Client
        with Client(self.address, timeout_s=10) as c:
            return c.stats()

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.kill()
        self.server.wait()

    def close(self) -> None:
        for p in [*self.runners, self.server]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


# ---- the clients (one process each) ----

def client_main(address: str, envs: int, start_at: float, stop_at: float, tag: int, out: mp.Queue) -> None:
    from kernelgym import Client, protocol
    from kernelgym.errors import KernelGymError, ServerError

    source_prefix = f"// null kernel, client {tag}\n"
    counter = 0
    sent = Counter()
    outcome = Counter()  # ok / runner_lost / error:<CODE> / unanswered
    latencies: list[float] = []
    ok_times: list[float] = []  # wall clock of each successful step reply
    inflight: dict[int, tuple[str, float, str]] = {}  # request id -> (env, sent at, op)

    c = Client(address, timeout_s=60, backoff_max_s=0.5)

    def fresh_env() -> str:
        for _ in range(100):
            try:
                env = c.make(TASK, backend="null", max_steps=10000)["env"]
                c.reset(env, seed=1)
                return env
            except KernelGymError:
                time.sleep(0.1)  # the server is restarting
        raise RuntimeError("could not make an env")

    def send(env: str, op: str) -> None:
        nonlocal counter
        counter += 1
        if op == "env.step":
            rid = c.send("env.step", env=env, action=protocol.replace(f"{source_prefix}// step {counter}\n"))
        else:
            rid = c.send("env.reset", env=env, seed=counter)
        sent[op] += 1
        inflight[rid] = (env, time.perf_counter(), op)

    pool = [fresh_env() for _ in range(envs)]
    while time.time() < start_at:
        time.sleep(0.001)
    for env in pool:
        send(env, "env.step")
    while inflight:
        now = time.time()
        reply = c.recv(timeout_s=1.0 if now < stop_at else max(0.0, stop_at + 60 - now))
        if reply is None:
            if time.time() >= stop_at + 60:
                break
            continue
        env, began, op = inflight.pop(reply.id)
        took = time.perf_counter() - began
        again = time.time() < stop_at
        if reply.ok:
            observation = reply.result["observation"]
            if observation["status"] == "ok":
                outcome["ok"] += 1
                latencies.append(took)
                ok_times.append(time.time())
            elif "RUNNER_LOST" in observation["message"]:
                outcome["runner_lost"] += 1
            else:
                outcome["status:" + observation["status"]] += 1
            done = op == "env.step" and (reply.result["terminated"] or reply.result["truncated"])
            if again:
                send(env, "env.reset" if done else "env.step")
            continue
        error = reply.error
        assert isinstance(error, ServerError)
        outcome["error:" + error.code] += 1
        if again:
            if error.code in ("SERVER_RESTARTED", "UNKNOWN_ENV"):
                env = fresh_env()  # the env died with its server
            send(env, "env.step")
    outcome["unanswered"] += len(inflight)
    c.close()
    out.put({"sent": dict(sent), "outcome": dict(outcome), "latencies": latencies, "ok_times": ok_times})


def run_clients(address: str, envs: int, clients: int, seconds: float, warmup: float,
                faults=None) -> tuple[list[dict], float, float]:
    """Starts the clients, runs `faults(t0)` meanwhile, returns their reports and the measured window."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    start_at = time.time() + 2.0 + envs * 0.004  # time to make and reset the envs
    stop_at = start_at + warmup + seconds
    procs = [ctx.Process(target=client_main, args=(address, envs // clients, start_at, stop_at, i, out))
             for i in range(clients)]
    for p in procs:
        p.start()
    if faults is not None:
        faults(start_at + warmup)
    reports = [out.get(timeout=stop_at - time.time() + 120) for _ in procs]
    for p in procs:
        p.join()
    return reports, start_at + warmup, stop_at


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p * (len(values) - 1)))]


# ---- scale ----

def scale(args: argparse.Namespace) -> list[dict]:
    rows = []
    configs = [(int(n), int(e), level) for n in args.runners.split(",") for e in str(args.envs).split(",")
               for level in args.runner_log_level.split(",")]
    for n, envs, level in configs:
        with tempfile.TemporaryDirectory(prefix="kernelgym-pool-") as tmp:
            pool = Pool(args.kernelgym, Path(tmp), n, level)
            try:
                pool.wait_for_runners(n)
                marks: dict[str, float] = {}

                def measure(t0: float) -> None:
                    while time.time() < t0:
                        time.sleep(0.001)
                    marks["server"] = cpu_seconds(pool.server.pid)
                    marks["runners"] = sum(cpu_seconds(r.pid) for r in pool.runners)
                    marks["t"] = time.time()
                    time.sleep(args.seconds)
                    marks["server_end"] = cpu_seconds(pool.server.pid)
                    marks["runners_end"] = sum(cpu_seconds(r.pid) for r in pool.runners)
                    marks["t_end"] = time.time()

                reports, t0, t1 = run_clients(pool.address, envs, args.clients, args.seconds, args.warmup, measure)
            finally:
                pool.close()
        ok_times = [t for r in reports for t in r["ok_times"] if marks["t"] <= t < marks["t_end"]]
        # Latencies of the steps answered inside the window (the warm-up's are left out).
        lat = []
        for r in reports:
            lat += [x for x, t in zip(r["latencies"], r["ok_times"]) if marks["t"] <= t < marks["t_end"]]
        window = marks["t_end"] - marks["t"]
        jobs = len(ok_times)
        row = {"runners": n, "envs": envs, "runner_log_level": level, "clients": args.clients, "seconds": round(window, 2), "jobs": jobs,
               "jobs_per_s": round(jobs / window, 1),
               "p50_ms": round(1000 * percentile(lat, 0.5), 2), "p99_ms": round(1000 * percentile(lat, 0.99), 2),
               "server_cpu_us_per_job": round(1e6 * (marks["server_end"] - marks["server"]) / max(1, jobs), 1),
               "runners_cpu_us_per_job": round(1e6 * (marks["runners_end"] - marks["runners"]) / max(1, jobs), 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| runners | envs | runner log | jobs/s | p50 ms | p99 ms | server CPU µs/job | runners CPU µs/job |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['runners']} | {r['envs']} | {r['runner_log_level']} | {r['jobs_per_s']:,.0f} | {r['p50_ms']} | {r['p99_ms']} | "
              f"{r['server_cpu_us_per_job']} | {r['runners_cpu_us_per_job']} |")
    return rows


# ---- faults ----

def faults(args: argparse.Namespace) -> dict:
    n = int(args.runners.split(",")[0])
    args.envs = int(str(args.envs).split(",")[0])
    if n < 3:
        raise SystemExit("faults needs at least 3 runners (one killed, one frozen, one left)")
    events: list[tuple[str, float]] = []
    stats_before_restart: dict = {}
    with tempfile.TemporaryDirectory(prefix="kernelgym-pool-") as tmp:
        pool = Pool(args.kernelgym, Path(tmp), n)
        try:
            pool.wait_for_runners(n)

            def inject(t0: float) -> None:
                def at(fraction: float) -> None:
                    while time.time() < t0 + fraction * args.seconds:
                        time.sleep(0.005)

                at(0.20)
                pool.runners[0].kill()
                events.append(("runner SIGKILL", time.time()))
                at(0.35)
                pool.runners[1].send_signal(signal.SIGSTOP)
                events.append(("runner SIGSTOP", time.time()))
                at(0.60)
                pool.runners[1].send_signal(signal.SIGCONT)
                events.append(("runner SIGCONT", time.time()))
                at(0.70)
                stats_before_restart.update(pool.stats())
                address, runners_address = pool.address, pool.runners_address
                pool.kill_server()
                events.append(("server SIGKILL + restart", time.time()))
                pool.start_server(address, runners_address)

            reports, t0, t1 = run_clients(pool.address, args.envs, args.clients, args.seconds, 0.0, inject)
            stats_after = pool.stats()
        finally:
            pool.close()
    sent = Counter()
    outcome = Counter()
    ok_times: list[float] = []
    answered: list[tuple[float, float]] = []  # (when, latency) of every ok step
    for r in reports:
        sent.update(r["sent"])
        outcome.update(r["outcome"])
        ok_times += r["ok_times"]
        answered += list(zip(r["ok_times"], r["latencies"]))
    ok_times.sort()
    gaps, slowest = {}, {}
    for i, (name, when) in enumerate(events):
        until = events[i + 1][1] if i + 1 < len(events) else t1
        window = [when] + [t for t in ok_times if when <= t <= until]
        gaps[name] = round(max((b - a for a, b in zip(window, window[1:])), default=float("nan")), 3)
        slowest[name] = round(max((lat for t, lat in answered if when <= t <= until), default=float("nan")), 3)
    before = [lat for t, lat in answered if t < events[0][1]]
    total_sent = sum(sent.values())
    accounted = sum(outcome.values())
    result = {
        "runners": n, "envs": args.envs, "seconds": args.seconds,
        "sent": dict(sent), "outcome": dict(outcome), "total_sent": total_sent, "accounted": accounted,
        "longest_gap_after_s": gaps,
        "slowest_step_after_s": slowest,
        "before_faults_p50_ms": round(1000 * percentile(before, 0.5), 2),
        "before_faults_p99_ms": round(1000 * percentile(before, 0.99), 2),
        "first_server": {k: stats_before_restart.get("scheduler", {}).get(k)
                         for k in ("requeued", "lost", "dropped_runners", "stale_results", "completed")},
        "second_server": {k: stats_after.get("scheduler", {}).get(k)
                          for k in ("requeued", "lost", "dropped_runners", "stale_results", "completed")},
    }
    print(json.dumps(result, indent=1))
    return result


# ---- memory ----

def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def memory(args: argparse.Namespace) -> dict:
    """What an env and a step cost the server, measured: heap (mallinfo2, stats.memory) and RSS
    before and after making --envs envs, stepping each --steps times with the task's starter
    source (a comment of its own each step), and closing them all."""
    from kernelgym import Client, protocol
    envs = int(str(args.envs).split(",")[0])
    with tempfile.TemporaryDirectory(prefix="kernelgym-pool-") as tmp:
        # The server's own null backend: no runner, every evaluation answered in process.
        endpoint_file = Path(tmp) / "endpoints.json"
        server = subprocess.Popen(
            [args.kernelgym, "--log-level", "warn", "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind",
             "tcp://127.0.0.1:*", "--endpoint-file", str(endpoint_file), "--record-dir", str(Path(tmp) / "store"),
             "--local-runners", "0", "--null-backend"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not endpoint_file.exists():
            if server.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        address = json.loads(endpoint_file.read_text())["clients"]
        pid = server.pid
        try:
            with Client(address, timeout_s=120) as c:
                starter = c.get_task(TASK)["versions"]["cpu"]["starter_source"]

                def batch(requests: list[tuple[str, dict]]) -> list:
                    ids = [c.send(op, **fields) for op, fields in requests]
                    replies = {}
                    while len(replies) < len(ids):
                        reply = c.recv(timeout_s=120)
                        replies[reply.id] = reply.unwrap()
                    return [replies[i] for i in ids]

                def sample(label: str) -> dict:
                    time.sleep(1.2)  # the server trims and re-reads its heap once a second
                    st = c.stats()
                    return {"at": label, "sessions": st["sessions"], "heap": st["memory"]["heap_bytes"],
                            "rss": rss_bytes(pid), "session_bytes": st["session_bytes"]}

                samples = [sample("start")]
                made = []
                for i in range(0, envs, 500):
                    made += [r["env"] for r in batch([("env.make", {"task": TASK, "backend": "null",
                                                                     "max_steps": args.steps + 1})] * min(500, envs - i))]
                batch([("env.reset", {"env": e, "seed": 1}) for e in made])
                samples.append(sample("made+reset"))
                for k in range(args.steps):
                    batch([("env.step", {"env": e, "action": protocol.replace(f"{starter}// step {k} of {e}\n"),
                                         "meta": {}}) for e in made])
                samples.append(sample(f"{args.steps} steps"))
                for i in range(0, len(made), 500):
                    batch([("env.close", {"env": e}) for e in made[i:i + 500]])
                samples.append(sample("closed"))
        finally:
            server.kill()
            server.wait()
    start, reset, stepped, closed = samples
    result = {
        "envs": envs, "steps": args.steps, "source_bytes": len(starter), "samples": samples,
        "heap_per_env": round((reset["heap"] - start["heap"]) / envs),
        "rss_per_env": round((reset["rss"] - start["rss"]) / envs),
        "session_bytes_per_env": round(reset["session_bytes"] / envs),
        "heap_per_step": round((stepped["heap"] - reset["heap"]) / (envs * args.steps)),
        "rss_per_step": round((stepped["rss"] - reset["rss"]) / (envs * args.steps)),
        "session_bytes_per_step": round((stepped["session_bytes"] - reset["session_bytes"]) / (envs * args.steps)),
        "rss_kept_after_close": closed["rss"] - start["rss"],
        "heap_kept_after_close": closed["heap"] - start["heap"],
    }
    print(json.dumps(result, indent=1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["scale", "faults", "memory"])
    parser.add_argument("--steps", type=int, default=16, help="memory: steps per env")
    parser.add_argument("--runners", default="1,4,16")
    parser.add_argument("--envs", default="64", help="envs (scale: a comma list)")
    parser.add_argument("--runner-log-level", default="warn", help="runners' --log-level (scale: a comma list)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--kernelgym", default=str(REPO / "build" / "cli" / "kernelgym"))
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    result = {"scale": scale, "faults": faults, "memory": memory}[args.mode](args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
