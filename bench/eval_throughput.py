#!/usr/bin/env python3
"""Evaluations per core-second under concurrency, two builds side by side (docs/benchmarks.md).

R runners (R in --runners, default 1 2 4) each evaluate --per-runner new kernels one after
another with `kernelgym eval --json` (one cold CLI process per evaluation, a source the compile
cache has never seen), all R at once; the builds alternate by runner count, so drift of the
machine affects both alike. Per build and R it reports:
  - evaluations per wall-second of the whole batch, and per CPU-second the evaluations used
    (user + system time of each CLI process and everything it started: compiler, harness,
    reference, executor), which is what a core-second buys. The sandboxed harness's processes
    are not all reaped by a parent that adds up their times (wait4 sees ~0.1 s per evaluation),
    so the CPU time is sampled from /proc every 50 ms over the whole process tree, each process's
    last reading kept: a process's last <50 ms are missed, alike for both builds;
  - the median latency of one evaluation and the median wait for the host's timing lock
    (stage_seconds.timing_lock_wait): only one timed session runs on a host at a time, so with
    more runners than timing windows the extra runners queue.

  python3 bench/eval_throughput.py --before OLD_BUILD --after build --task cpu/silu_mul \\
      --source tests/honest/silu_mul_avx2/kernel.cpp --per-runner 4
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path


class TreeCpu:
    """Samples the CPU time (utime + stime, /proc/PID/stat) of every descendant of the roots."""

    def __init__(self, period=0.05):
        self.period, self.roots, self.seen, self.lock = period, set(), {}, threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self):
        parent, cpu = {}, {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry)
            parent[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with self.lock:
            for pid, seconds in cpu.items():
                p, root = pid, None
                while p in parent and p > 1:
                    if p in self.roots:
                        root = p
                        break
                    p = parent[p]
                if root is not None:
                    self.seen[(root, pid)] = seconds

    def run(self):
        while not self.stop.is_set():
            self.sample()
            time.sleep(self.period)

    def add(self, pid):
        with self.lock:
            self.roots.add(pid)

    def total(self, root):
        self.sample()
        with self.lock:
            self.roots.discard(root)
            return sum(v for (r, _), v in self.seen.items() if r == root)


TREE = None


def one_eval(build, task, source, workdir):
    path = Path(workdir) / f"{uuid.uuid4().hex}.cpp"
    path.write_text(Path(source).read_text() + f"\n// {uuid.uuid4().hex}\n")
    env = dict(os.environ, KERNELGYM_TOOLS_DIR=str(Path(build).resolve() / "tpu_runner"))
    start = time.monotonic()
    proc = subprocess.Popen([str(Path(build) / "cli/kernelgym"), "eval", "--task", task, "--source", str(path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    TREE.add(proc.pid)
    out = proc.stdout.read()
    cpu = TREE.total(proc.pid)  # before the CLI is reaped: its own last reading too
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    try:
        r = json.loads(out)
    except json.JSONDecodeError:
        r = {}
    return {"status": r.get("status", "no-json"), "seconds": seconds, "cpu": cpu,
            "lock_wait": (r.get("stage_seconds") or {}).get("timing_lock_wait", 0.0)}


def batch(build, task, source, runners, per_runner, workdir):
    results, lock = [], threading.Lock()

    def worker():
        for _ in range(per_runner):
            row = one_eval(build, task, source, workdir)
            with lock:
                results.append(row)

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(runners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    ok = [r for r in results if r["status"] == "ok"]
    cpu = sum(r["cpu"] for r in results)
    return {"runners": runners, "evals": len(results), "ok": len(ok), "wall": wall, "cpu": cpu,
            "per_wall_s": len(results) / wall, "per_cpu_s": len(results) / cpu if cpu else 0,
            "latency_median": statistics.median(r["seconds"] for r in results),
            "lock_wait_median": statistics.median(r["lock_wait"] for r in results)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the old build folder")
    ap.add_argument("--after", required=True, help="the new build folder")
    ap.add_argument("--task", default="cpu/silu_mul")
    ap.add_argument("--source", default="tests/honest/silu_mul_avx2/kernel.cpp")
    ap.add_argument("--runners", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--per-runner", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global TREE
    TREE = TreeCpu()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for i, r in enumerate(args.runners):
            order = [("before", args.before), ("after", args.after)]
            for name, build in (order if i % 2 == 0 else order[::-1]):
                row = batch(build, args.task, args.source, r, args.per_runner, workdir)
                row["build"] = name
                rows.append(row)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load": load, "rows": rows}))
        return
    print(f"task {args.task}, {args.per_runner} cold evaluations per runner, load average {load:.1f} at the end\n")
    print("| build | runners | ok | evals / wall-s | evals / CPU-s | CPU-s / eval | latency median s | timing-lock wait median s |")
    print("|---|---|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda r: (r["runners"], r["build"] != "before")):
        print(f"| {row['build']} | {row['runners']} | {row['ok']}/{row['evals']} | {row['per_wall_s']:.3f} | {row['per_cpu_s']:.3f} | "
              f"{row['cpu'] / row['evals']:.2f} | {row['latency_median']:.2f} | {row['lock_wait_median']:.2f} |")


if __name__ == "__main__":
    main()
