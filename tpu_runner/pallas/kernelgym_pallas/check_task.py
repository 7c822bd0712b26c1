"""A task author's check of a Pallas task (or of one candidate for it), through the real judge and
tracer:

    python -m kernelgym_pallas.check_task datasets/suites/cpu/silu_mul [--candidate FILE]

It starts judge.py and tracer.py as children (without the bubblewrap sandbox and the seccomp
filter the runner adds), plays the runner's side of the protocol and compares outputs with the
same rule as the runner
(|actual - expected| <= atol + rtol * |expected|). The runner's verdict (`kernelgym eval
--backend pallas`) is the one that counts; this is the quick loop while writing a task.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from . import protocol


def compare(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float) -> tuple[int, float]:
    if expected.shape != actual.shape:
        return expected.size, float("inf")
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    if np.issubdtype(expected.dtype, np.integer):
        bad = e != a
    else:
        bad = ~(np.abs(a - e) <= atol + rtol * np.abs(e))
    err = float(np.max(np.abs(a - e))) if e.size else 0.0
    return int(bad.sum()), err


def _start(module: str, args: list[str], env: dict, folder: pathlib.Path) -> subprocess.Popen:
    # Each process works in its own job folder, as under the runner: the judge writes libtpu's
    # schedule dump (the estimate's source) into `tpu_scratch` under its working folder, and two
    # checks sharing one read each other's files (an estimate withheld or priced from the other
    # compile's kernels). The package is found through PYTHONPATH instead.
    package_parent = str(pathlib.Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen([sys.executable, "-m", module, *args, "--no-seccomp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=dict(env, PYTHONPATH=path), cwd=folder)


def _read(process: subprocess.Popen, who: str):
    while True:
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the {who} exited ({process.wait()})")
        message = protocol.decode(line)
        if isinstance(message, protocol.CompileKey):
            # The runner's side of the compile cache: a check keeps no cache, so the judge compiles.
            _send(process, protocol.CompileFacts(tpu_compile=None, estimate=None))
        elif not isinstance(message, (protocol.Progress, protocol.CompileFacts)):
            return message  # CompileFacts after a compile: the facts a runner would keep


def _send(process: subprocess.Popen, message) -> None:
    process.stdin.write(protocol.encode(message) + "\n")
    process.stdin.flush()


@dataclasses.dataclass
class Checked:
    status: str          # the judge's status, "incorrect" when an output is outside tolerance
    message: object      # the judge's last message (protocol.Result, or the tracer's failure)
    lines: list[str]     # per trial and output: how many elements were outside tolerance
    seconds: float
    reference_estimate: object = None  # protocol.ReferenceEstimate, when the judge made one


def check(task_dir: pathlib.Path, candidate: str, target: str = "v5e", layout: str = "kernelgym", seeds=(1, 2, 3),
          static_check: bool = True, estimate_reference: bool = True, verbose: bool = False) -> Checked:
    """One candidate through a judge and a tracer of its own (each serves one job: the candidate's
    code runs in them)."""
    with tempfile.TemporaryDirectory(prefix="kernelgym-pallas-judge-") as judge_tmp, \
            tempfile.TemporaryDirectory(prefix="kernelgym-pallas-tracer-") as tracer_tmp:
        judge_dir, tracer_dir = pathlib.Path(judge_tmp), pathlib.Path(tracer_tmp)
        for folder in (judge_dir, tracer_dir):
            (folder / "candidate.py").write_text(candidate)
        started = time.perf_counter()
        judge = _start("kernelgym_pallas.judge", ["--target", target], dict(os.environ), judge_dir)
        tracer = _start("kernelgym_pallas.tracer", [], dict(os.environ, JAX_PLATFORMS="cpu"), tracer_dir)
        ready = _read(judge, "judge")
        _read(tracer, "tracer")
        if verbose:
            print(f"judge and tracer ready in {time.perf_counter() - started:.2f} s: {ready}")
        job = protocol.JudgeJob(task_dir=str(task_dir.resolve()), layout=layout, suite="jaxbench-ext",
                                out_dir=str(judge_dir), candidate_path=str(judge_dir / "candidate.py"),
                                seeds=list(seeds), static_check=static_check,
                                run_timing=True, timing_seed=0, estimate_reference=estimate_reference,
                                estimate_candidate=True)
        job_start = time.perf_counter()
        _send(judge, job)
        message = _read(judge, "judge")
        expected = {}
        reference_estimate = None
        if isinstance(message, protocol.Specs):
            _send(tracer, protocol.TraceJob(candidate_path=str(tracer_dir / "candidate.py"),
                                            size_sets=message.size_sets,
                                            artifact_path=str(tracer_dir / "program.pkl")))
            message = _read(judge, "judge")
            reference_estimate = getattr(message, "estimate", None)
            for t, trial in enumerate(message.trials):
                for k, o in enumerate(trial.outputs):
                    expected[(t, k)] = (np.fromfile(judge_dir / o.file, dtype=o.dtype).reshape(o.shape), o,
                                        trial.size_set)
            traced = _read(tracer, "tracer")
            if isinstance(traced, protocol.Traced):
                shutil.copyfile(tracer_dir / "program.pkl", judge_dir / "program.pkl")
                _send(judge, protocol.Artifact(file="program.pkl"))
                message = _read(judge, "judge")
            else:
                message = traced
        seconds = time.perf_counter() - job_start
        for process in (judge, tracer):
            process.stdin.close()
            process.wait()
            process.stdout.close()
        status = message.status
        failures, lines = 0, []
        for trial in getattr(message, "trials", []):
            for k, o in enumerate(trial.outputs):
                actual = np.fromfile(judge_dir / o.file, dtype=o.dtype).reshape(o.shape)
                want, meta, size_set = expected[(trial.trial, k)]
                bad, err = compare(want, actual, meta.atol, meta.rtol)
                failures += bad > 0
                lines.append(f"trial {trial.trial} ({size_set}){' (repeat)' if trial.repeat else ''} {meta.name}: "
                             f"{bad} of {want.size} outside tolerance, max abs error {err:.3g}")
        if status == "ok" and failures:
            status = "incorrect"
        return Checked(status, message, lines, seconds, reference_estimate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_dir", type=pathlib.Path)
    parser.add_argument("--candidate", type=pathlib.Path, help="default: the task's pallas/starter.py")
    parser.add_argument("--layout", default="kernelgym", choices=["kernelgym", "jaxbench"])
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--no-static-check", action="store_true",
                        help="skip the judge's static check (to see what the later checks make of a candidate)")
    args = parser.parse_args()
    candidate = args.candidate or args.task_dir / "pallas" / "starter.py"
    checked = check(args.task_dir, candidate.read_text(), args.target, args.layout,
                    [int(s) for s in args.seeds.split(",")], not args.no_static_check, verbose=True)
    message = checked.message
    for d in getattr(message, "diagnostics", []):
        print(f"candidate.py:{d.line}: {d.severity}: {d.message}")
    for line in checked.lines:
        print(line)
    facts = dataclasses.asdict(message)
    print(json.dumps({k: facts.get(k) for k in ("stage", "message", "tpu_compile", "estimate", "timing",
                                                 "stage_seconds")}, indent=1))
    reference, candidate = checked.reference_estimate, getattr(message, "estimate", None)
    if reference is not None and reference.estimated_us > 0:
        line = f"reference estimate: {reference.estimated_us:.1f} us ({'trusted' if reference.trusted else 'untrusted'})"
        if candidate is not None and candidate.estimated_us > 0:
            line += f"; estimated speedup {reference.estimated_us / candidate.estimated_us:.3f}x"
        print(line)
    print(f"verdict: {checked.status} ({checked.seconds:.2f} s for the job)")
    return 0 if checked.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
