#!/usr/bin/env python3
"""Soak: one `kernelgym serve` under steady load for a long time; do its memory and descriptors stay flat?

    python3 bench/soak.py [--duration 600] [--null-sessions 1000] [--cpu-sessions 100]
                          [--null-rate 1000] [--interval 10] [--warmup 120] [--local-runners 2]
                          [--out docs/figures/soak] [--kernelgym build/cli/kernelgym]

Load: --null-sessions envs on the `null` backend (answered by the server itself) stepping at about
--null-rate steps/s in all, and --cpu-sessions envs on the `cpu` backend, each always with a step
queued for the local runners (every step a fresh compile: a comment of its own; one in four a broken
edit, so compile errors flow too). Episodes end (max_steps) and restart; one ended null episode in
ten closes its env and makes a new one, so sessions churn.

Every --interval seconds: resident memory (VmRSS) and open descriptors (/proc/PID/fd) of the server
and of each local runner (and of everything the runners started: harness, compiler), plus the
server's own counters (`stats`). Writes PREFIX-samples.csv, PREFIX-summary.json and PREFIX-plot.svg (two
small line plots, drawn here: no plotting dependency), and prints whether each series stayed flat:
after --warmup seconds, the mean of the last third against the mean of the first third, and the max.

Needs the kernelgym Python package (`pip install ./python`); everything else is the standard library.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import kernelgym
from kernelgym import protocol

REPO = Path(__file__).resolve().parent.parent
TASK = "cpu/softmax_rows"
# Flat: the last third's mean within this of the first third's (relative), or this many kB/fds.
RSS_TOLERANCE = 0.05
RSS_SLACK_KB = 2048
FD_SLACK = 2


# ---- /proc ----

def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


# ---- load ----

class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.null_steps = 0
        self.cpu_steps = 0
        self.cpu_statuses: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.made = 0
        self.closed = 0
        self.stray = 0

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def count(self, table: str, key: str) -> None:
        with self.lock:
            d = getattr(self, table)
            d[key] = d.get(key, 0) + 1


def null_load(address: str, sessions: int, rate: float, stop: threading.Event, counters: Counters) -> None:
    """`sessions` null envs stepping at about `rate` steps/s in all, up to 64 in flight."""
    client = kernelgym.Client(address, timeout_s=60)
    rng = random.Random(1)
    pending: dict[int, tuple[str, int]] = {}  # request id -> (op, slot)
    envs: list[str | None] = [None] * sessions
    step_of = [0] * sessions

    def make(slot: int) -> None:
        pending[client.send("env.make", task=TASK, backend="null", reward="log_speedup_gain",
                            reward_config={}, max_steps=16, time_budget_s=0.0, record=False)] = ("make", slot)

    def step(slot: int) -> None:
        step_of[slot] += 1
        # Sources of varied sizes, so the allocator sees the churn a real policy causes.
        source = f"// slot {slot} step {step_of[slot]}\n" + "x" * rng.randrange(64, 8192) + "\n"
        pending[client.send("env.step", env=envs[slot], action=protocol.replace(source), meta={})] = ("step", slot)

    for slot in range(sessions):
        make(slot)
    ready: list[int] = []  # slots whose env is made and reset, waiting for their next step
    start = time.monotonic()
    sent_steps = 0
    while not stop.is_set():
        # Pace the steps: at most rate * elapsed sent so far, at most 64 in flight.
        allowed = int(rate * (time.monotonic() - start)) - sent_steps
        while ready and allowed > 0 and len(pending) < 64:
            step(ready.pop(rng.randrange(len(ready))))
            sent_steps += 1
            allowed -= 1
        reply = client.recv(0.01)
        if reply is None:
            continue
        if reply.id not in pending:
            counters.add("stray")
            continue
        op, slot = pending.pop(reply.id)
        if not reply.ok:
            counters.count("errors", f"{op}:{reply.error.code if reply.error else '?'}")
            if op == "make":
                make(slot)
            else:
                ready.append(slot)
            continue
        result = reply.result or {}
        if op == "make":
            counters.add("made")
            envs[slot] = result["env"]
            step_of[slot] = 0
            pending[client.send("env.reset", env=envs[slot], seed=slot)] = ("reset", slot)
        elif op == "reset":
            ready.append(slot)
        elif op == "close":
            counters.add("closed")
            make(slot)
        else:
            counters.add("null_steps")
            if result.get("terminated") or result.get("truncated"):
                if rng.random() < 0.1:
                    pending[client.send("env.close", env=envs[slot])] = ("close", slot)
                else:
                    step_of[slot] = 0
                    pending[client.send("env.reset", env=envs[slot], seed=rng.randrange(1 << 30))] = ("reset", slot)
            else:
                ready.append(slot)
    client.close()


def cpu_load(address: str, sessions: int, stop: threading.Event, counters: Counters) -> None:
    """`sessions` cpu envs, each with a step always queued for the runners."""
    improved = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
    client = kernelgym.Client(address, timeout_s=600)
    rng = random.Random(2)
    pending: dict[int, tuple[str, int]] = {}
    envs = [client.make(TASK, backend="cpu", max_steps=6)["env"] for _ in range(sessions)]
    counters.add("made", sessions)
    step_of = [0] * sessions
    serial = 0
    for slot, env in enumerate(envs):
        pending[client.send("env.reset", env=env, seed=slot)] = ("reset", slot)
    while not stop.is_set():
        reply = client.recv(0.2)
        if reply is None:
            continue
        if reply.id not in pending:
            counters.add("stray")
            continue
        op, slot = pending.pop(reply.id)
        if not reply.ok:
            counters.count("errors", f"cpu {op}:{reply.error.code if reply.error else '?'}")
            step_of[slot] = 0
            pending[client.send("env.reset", env=envs[slot], seed=slot)] = ("reset", slot)
            continue
        result = reply.result or {}
        counters.count("cpu_statuses", result["observation"]["status"])
        if op == "step":
            counters.add("cpu_steps")
        if result.get("terminated") or result.get("truncated"):
            step_of[slot] = 0
            pending[client.send("env.reset", env=envs[slot], seed=rng.randrange(1 << 30))] = ("reset", slot)
            continue
        serial += 1
        step_of[slot] += 1
        if rng.random() < 0.25:  # a broken edit: compile_error
            action = protocol.replace(improved.replace('extern "C" void kernel(', 'extern "C" void kernel(oops ', 1))
        else:
            action = protocol.replace(f"{improved}\n// soak {serial}\n")
        pending[client.send("env.step", env=envs[slot], action=action, meta={})] = ("step", slot)
    client.close()


# ---- output ----

def thirds(values: list[float]) -> tuple[float, float, float]:
    n = max(1, len(values) // 3)
    return statistics.fmean(values[:n]), statistics.fmean(values[-n:]), max(values)


def flat_rss(values: list[float]) -> bool:
    first, last, _ = thirds(values)
    return last - first <= max(RSS_TOLERANCE * first, RSS_SLACK_KB)


def flat_fds(values: list[float]) -> bool:
    first, last, peak = thirds(values)
    return last - first <= FD_SLACK and peak - min(values) <= 2 * FD_SLACK


def polyline(points: list[tuple[float, float]], x0: float, x1: float, y0: float, y1: float, box: tuple) -> str:
    left, top, width, height = box
    span_x = (x1 - x0) or 1
    span_y = (y1 - y0) or 1
    return " ".join(f"{left + (x - x0) / span_x * width:.1f},{top + height - (y - y0) / span_y * height:.1f}"
                    for x, y in points)


def svg(samples: list[dict], series: list[list[tuple[str, str, str]]], titles: list[str], warmup: float) -> str:
    """One panel per list in `series` (key, label, color), stacked; time on x."""
    width, panel_h, margin_l, margin_r = 720, 220, 70, 170
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{panel_h * len(series) + 30}" '
           f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    t = [s["t_s"] for s in samples]
    x0, x1 = 0.0, max(t) if t else 1.0
    for p, (panel, title) in enumerate(zip(series, titles)):
        top = 20 + p * panel_h
        box = (margin_l, top + 10, width - margin_l - margin_r, panel_h - 60)
        values = [s[k] for k, _, _ in panel for s in samples]
        y1 = max(values) * 1.1 if values and max(values) > 0 else 1.0
        left, btop, bw, bh = box
        out.append(f'<text x="{left}" y="{top}" font-weight="bold">{title}</text>')
        out.append(f'<rect x="{left}" y="{btop}" width="{bw}" height="{bh}" fill="none" stroke="#999"/>')
        for i in range(5):  # y ticks
            y = y1 * i / 4
            py = btop + bh - bh * i / 4
            out.append(f'<line x1="{left - 4}" y1="{py:.1f}" x2="{left}" y2="{py:.1f}" stroke="#999"/>')
            out.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{y:.0f}</text>')
        for i in range(6):  # x ticks
            x = x1 * i / 5
            px = left + bw * i / 5
            out.append(f'<text x="{px:.1f}" y="{btop + bh + 14}" text-anchor="middle">{x:.0f} s</text>')
        if 0 < warmup < x1:
            px = left + bw * warmup / x1
            out.append(f'<line x1="{px:.1f}" y1="{btop}" x2="{px:.1f}" y2="{btop + bh}" stroke="#bbb" '
                       f'stroke-dasharray="4,3"/><text x="{px + 3:.1f}" y="{btop + 12}" fill="#888">warm-up</text>')
        for j, (key, label, color) in enumerate(panel):
            pts = [(s["t_s"], s[key]) for s in samples]
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                       f'points="{polyline(pts, x0, x1, 0, y1, box)}"/>')
            ly = btop + 12 + 16 * j
            out.append(f'<line x1="{left + bw + 10}" y1="{ly - 4}" x2="{left + bw + 30}" y2="{ly - 4}" '
                       f'stroke="{color}" stroke-width="2"/><text x="{left + bw + 34}" y="{ly}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- main ----

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    ap.add_argument("--null-sessions", type=int, default=1000)
    ap.add_argument("--cpu-sessions", type=int, default=100)
    ap.add_argument("--null-rate", type=float, default=1000, help="null steps per second, all sessions together")
    ap.add_argument("--interval", type=float, default=10, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=120,
                    help="seconds left out of the flatness verdict (the cpu envs' first resets queue for ~100 s)")
    ap.add_argument("--local-runners", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "docs/figures/soak"), help="output prefix")
    ap.add_argument("--kernelgym", default=str(REPO / "build/cli/kernelgym"))
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kernelgym-soak-"))
    endpoint_file = work / "endpoints.json"
    log = open(work / "server.log", "w")
    server = subprocess.Popen(
        [args.kernelgym, "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind", "tcp://127.0.0.1:*",
         "--endpoint-file", str(endpoint_file), "--null-backend", "--local-runners", str(args.local_runners),
         "--record-dir", str(work / "store"), "--max-sessions", str(args.null_sessions + args.cpu_sessions + 100)],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not endpoint_file.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            print(f"the server did not start; see {work / 'server.log'}", file=sys.stderr)
            return 2
        time.sleep(0.05)
    address = json.loads(endpoint_file.read_text())["clients"]
    watcher = kernelgym.Client(address, timeout_s=30)
    while len(watcher.stats()["scheduler"]["runners"]) < args.local_runners:
        time.sleep(0.1)

    stop = threading.Event()
    counters = Counters()
    threads = [threading.Thread(target=null_load, args=(address, args.null_sessions, args.null_rate, stop, counters)),
               threading.Thread(target=cpu_load, args=(address, args.cpu_sessions, stop, counters))]
    for t in threads:
        t.start()

    samples: list[dict] = []
    start = time.monotonic()
    print(f"soak: {args.null_sessions} null + {args.cpu_sessions} cpu sessions, {args.duration:.0f} s, "
          f"server pid {server.pid}, log {work / 'server.log'}")
    next_sample = start
    while True:
        now = time.monotonic()
        if now >= next_sample:
            stats = watcher.stats()
            runners = [int(p) for p in (stats.get("local_runners") or {}).get("pids", [])]
            tree = [p for r in runners for p in descendants(r)]
            with counters.lock:
                sample = {
                    "t_s": round(now - start, 1),
                    "server_rss_kb": rss_kb(server.pid),
                    "server_fds": fd_count(server.pid),
                    "runners_rss_kb": sum(rss_kb(p) for p in runners),
                    "runners_fds": sum(fd_count(p) for p in runners),
                    "runner_children_rss_kb": sum(rss_kb(p) for p in tree),
                    "runner_children": len(tree),
                    "runner_pids": " ".join(map(str, runners)),
                    "sessions": stats["sessions"],
                    "session_bytes": stats["session_bytes"],
                    "server_steps": stats["steps"],
                    "null_steps": counters.null_steps,
                    "cpu_steps": counters.cpu_steps,
                    "envs_made": counters.made,
                    "envs_closed": counters.closed,
                    "undeliverable": stats["undeliverable_replies"],
                    "runner_restarts": (stats.get("local_runners") or {}).get("restarts", 0),
                }
            samples.append(sample)
            print(f"  t={sample['t_s']:6.0f} s  server {sample['server_rss_kb'] / 1024:6.1f} MB {sample['server_fds']:3d} fds"
                  f"  runners {sample['runners_rss_kb'] / 1024:6.1f} MB {sample['runners_fds']:3d} fds"
                  f" (+children {sample['runner_children_rss_kb'] / 1024:5.1f} MB)  sessions {sample['sessions']}"
                  f"  null {sample['null_steps']}  cpu {sample['cpu_steps']}", flush=True)
            next_sample += args.interval
            if now - start >= args.duration:
                break
        time.sleep(max(0.0, min(next_sample - time.monotonic(), 1.0)))

    stop.set()
    for t in threads:
        t.join(timeout=120)
    watcher.close()
    server.send_signal(signal.SIGTERM)
    try:
        exit_code = server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.kill()
        exit_code = server.wait()

    steady = [s for s in samples if s["t_s"] >= args.warmup] or samples
    verdicts = {}
    for key, flat in [("server_rss_kb", flat_rss), ("server_fds", flat_fds), ("runners_rss_kb", flat_rss),
                      ("runners_fds", flat_fds), ("runner_children_rss_kb", flat_rss)]:
        values = [float(s[key]) for s in steady]
        first, last, peak = thirds(values)
        verdicts[key] = {"start": samples[0][key], "warm": steady[0][key], "middle": steady[len(steady) // 2][key],
                         "end": steady[-1][key], "first_third_mean": round(first, 1),
                         "last_third_mean": round(last, 1), "max": peak, "flat": flat(values)}
    elapsed = samples[-1]["t_s"]
    summary = {
        "command": " ".join(sys.argv),
        "duration_s": elapsed,
        "null_sessions": args.null_sessions,
        "cpu_sessions": args.cpu_sessions,
        "null_steps": counters.null_steps,
        "null_steps_per_s": round(counters.null_steps / elapsed, 1) if elapsed else 0,
        "cpu_steps": counters.cpu_steps,
        "cpu_statuses": counters.cpu_statuses,
        "envs_made": counters.made,
        "envs_closed": counters.closed,
        "error_replies": counters.errors,
        "stray_replies": counters.stray,
        "server_exit_code": exit_code,
        "warmup_s": args.warmup,
        "series": verdicts,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{out}-samples.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(samples[0]))
        writer.writeheader()
        writer.writerows(samples)
    Path(f"{out}-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    mb = [{**s, **{k: s[k] / 1024 for k in ("server_rss_kb", "runners_rss_kb", "runner_children_rss_kb")}} for s in samples]
    Path(f"{out}-plot.svg").write_text(svg(
        mb,
        [[("server_rss_kb", "server", "#1f77b4"), ("runners_rss_kb", "runners (sum)", "#d62728"),
          ("runner_children_rss_kb", "runners' children", "#999999")],
         [("server_fds", "server", "#1f77b4"), ("runners_fds", "runners (sum)", "#d62728")]],
        ["Resident memory (MB)", "Open file descriptors"], args.warmup))

    print(f"\n{counters.null_steps} null steps ({summary['null_steps_per_s']}/s), {counters.cpu_steps} cpu steps "
          f"{counters.cpu_statuses}, envs made {counters.made} closed {counters.closed}, "
          f"error replies {counters.errors}, stray {counters.stray}, server exit {exit_code}")
    ok = exit_code == 0 and counters.stray == 0
    for key, v in verdicts.items():
        print(f"{key:24s} start {v['start']:>8}  warm {v['warm']:>8}  middle {v['middle']:>8}  end {v['end']:>8}  "
              f"first third {v['first_third_mean']:>10}  last third {v['last_third_mean']:>10}  max {v['max']:>8}  "
              f"{'flat' if v['flat'] else 'GROWS'}")
        ok = ok and v["flat"]
    print(f"wrote {out}-samples.csv, {out}-summary.json, {out}-plot.svg")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
