"""What the full-size sample check (tpu_runner/pallas/kernelgym_pallas/full_size_sample.py) covers,
catches and costs: every bundled task's Pallas starter checked against itself, every case of
tests/adversarial_pallas that is a kernel for a task whose starter can be sampled, and repeated
checks of jaxbench-p/gemm's starter (the issue-35 latency target's task). One child process per
check (a fresh interpreter, as a judge's job is; its CPU time counts every thread), JSON lines out:

    build/pallas-venv/bin/python bench/full_size_sample.py starters > starters.jsonl
    build/pallas-venv/bin/python bench/full_size_sample.py adversarial > adversarial.jsonl
    build/pallas-venv/bin/python bench/full_size_sample.py gemm --repeat 5 > gemm.jsonl
    build/pallas-venv/bin/python bench/full_size_sample.py summary starters.jsonl

Adversarial cases that attack the judge's process rather than the answer (imports, pickles,
patches: the static check's cases) are not run: this script runs kernels unsandboxed.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The static check's and the sandbox's cases: they attack the process, not the answer.
PROCESS_ATTACKS = ("alias_disables_check", "attrgetter_forges_report", "forges_program_pickle", "frame_reads_expected",
                   "imports_", "interpret_flag", "numpy_", "patches_", "pickle_", "platform_dependent",
                   "positional_", "program_symlink", "reflection_", "static_module", "sys_modules", "type_hints",
                   "calls_reference", "caches_results", "never_returns", "reads_out_of_bounds")

CHILD = r"""
import json, sys, time, pathlib
sys.path.insert(0, sys.argv[1] + "/tpu_runner/pallas")
import jax, jax.numpy as jnp
from kernelgym_pallas import full_size_sample as fss, task_spec
task_dir, candidate, seed, count = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
task = task_spec.load_task(task_dir, "kernelgym", task_dir.parent.name)
args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
t = time.process_time()
try:
    cand = jax.make_jaxpr(task_spec.load_function(candidate, "kernel", "candidate"))(*args)
    orac = jax.make_jaxpr(task_spec.load_function(task.starter_path, "kernel", "starter"))(*args)
except Exception as e:
    print(json.dumps(dict(status="trace_error", reason=f"{type(e).__name__}: {str(e)[:200]}"))); sys.exit()
trace_cpu = time.process_time() - t
v = fss.check_program(cand, orac, task, seed, count)
print(json.dumps(dict(status=v.status, side=v.side, costly=v.costly, reason=v.reason[:300], steps=v.steps, oracle_steps=v.oracle_steps,
                      compared=len(v.blocks), trace_cpu=round(trace_cpu, 3),
                      **{k: round(x, 3) for k, x in v.seconds.items()})))
"""


def run_one(task_dir: pathlib.Path, candidate: pathlib.Path, seed: int, count: int, timeout: float) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    started = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(task_dir), str(candidate), str(seed),
                              str(count)], capture_output=True, text=True, timeout=timeout, env=env)
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        row = json.loads(lines[-1]) if lines else dict(status="error", reason=out.stderr[-300:])
    except subprocess.TimeoutExpired:
        row = dict(status="timeout", reason=f"over {timeout} s")
    row["wall"] = round(time.perf_counter() - started, 2)
    return row


def starters(args) -> None:
    for starter in sorted(ROOT.glob("datasets/suites/*/*/pallas/starter.py")):
        folder = starter.parent.parent
        row = run_one(folder, starter, args.seed, args.count, args.timeout)
        print(json.dumps(dict(task=f"{folder.parent.name}/{folder.name}", **row)), flush=True)


def adversarial(args) -> None:
    for case in sorted((ROOT / "tests/adversarial_pallas").iterdir()):
        kernel, expected = case / "kernel.py", case / "expected.json"
        if not kernel.exists() or any(case.name.startswith(p) for p in PROCESS_ATTACKS):
            continue
        if args.cases and not any(fnmatch.fnmatch(case.name, pattern) for pattern in args.cases.split(",")):
            continue
        meta = json.loads(expected.read_text())
        row = run_one(ROOT / "datasets/suites" / meta["task"], kernel, args.seed, args.count, args.timeout)
        print(json.dumps(dict(case=case.name, task=meta["task"], judge=meta.get("status"),
                              judge_estimate=meta.get("estimate", ""), **row)), flush=True)


def gemm(args) -> None:
    folder = ROOT / "datasets/suites/jaxbench-p/gemm"
    for i in range(args.repeat):
        row = run_one(folder, folder / "pallas/starter.py", args.seed + i, args.count, args.timeout)
        print(json.dumps(dict(task="jaxbench-p/gemm", seed=args.seed + i, count=args.count, **row)), flush=True)


def summary(args) -> None:
    rows = [json.loads(line) for line in open(args.file)]
    by_status = {}
    for r in rows:
        by_status.setdefault(r["status"], []).append(r.get("case") or r["task"])
    for status, names in sorted(by_status.items()):
        print(f"{status}: {len(names)}")
    sampled = [r for r in rows if "candidate_cpu" in r]
    for key in ("oracle_cpu", "candidate_cpu"):
        values = sorted(r[key] for r in sampled)
        if values:
            print(f"{key}: median {statistics.median(values):.2f} s, max {values[-1]:.2f} s over {len(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["starters", "adversarial", "gemm", "summary"])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2, help="random blocks per output beside the first and last")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--cases", default="", help="adversarial: only cases matching these comma-separated globs")
    args = parser.parse_args()
    {"starters": starters, "adversarial": adversarial, "gemm": gemm, "summary": summary}[args.mode](args)


if __name__ == "__main__":
    main()
