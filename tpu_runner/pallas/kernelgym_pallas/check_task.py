"""A task author's check of a Pallas task (or of one candidate for it), through the real worker:

    python -m kernelgym_pallas.check_task datasets/suites/cpu/silu_mul [--candidate FILE]

It starts worker.py as a child (without the bubblewrap sandbox the runner adds), plays the
runner's side of the protocol and compares outputs with the same rule as the runner
(|actual - expected| <= atol + rtol * |expected|). The runner's verdict (`kernelgym eval
--backend pallas`) is the one that counts; this is the quick loop while writing a task.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_dir", type=pathlib.Path)
    parser.add_argument("--candidate", type=pathlib.Path, help="default: the task's pallas/starter.py")
    parser.add_argument("--layout", default="kernelgym", choices=["kernelgym", "jaxbench"])
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    candidate = args.candidate or args.task_dir / "pallas" / "starter.py"
    with tempfile.TemporaryDirectory(prefix="kernelgym-pallas-check-") as tmp:
        out = pathlib.Path(tmp)
        (out / "candidate.py").write_text(candidate.read_text())
        started = time.perf_counter()
        worker = subprocess.Popen([sys.executable, "-m", "kernelgym_pallas.worker", "--target", args.target,
                                   "--no-seccomp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  cwd=pathlib.Path(__file__).resolve().parent.parent)

        def read():
            while True:
                line = worker.stdout.readline()
                if not line:
                    raise SystemExit(f"worker exited ({worker.wait()})")
                event = json.loads(line)
                if event.get("event") != "progress":
                    return event

        ready = read()
        print(f"worker ready in {time.perf_counter() - started:.2f} s: {ready}")
        job = {"task_dir": str(args.task_dir.resolve()), "layout": args.layout, "out_dir": str(out),
               "candidate_path": str(out / "candidate.py"), "seeds": [int(s) for s in args.seeds.split(",")]}
        job_start = time.perf_counter()
        worker.stdin.write(json.dumps({"job": job}) + "\n")
        worker.stdin.flush()
        message = read()
        expected = {}
        if message["event"] == "reference":
            for t, trial in enumerate(message["trials"]):
                for k, o in enumerate(trial["outputs"]):
                    expected[(t, k)] = (np.fromfile(out / o["file"], dtype=o["dtype"]).reshape(o["shape"]), o)
            worker.stdin.write(json.dumps({"go": True}) + "\n")
            worker.stdin.flush()
            message = read()
        seconds = time.perf_counter() - job_start
        worker.stdin.close()
        worker.wait()
        status = message["status"]
        for d in message.get("diagnostics", []):
            print(f"candidate.py:{d['line']}: {d['severity']}: {d['message']}")
        failures = 0
        for trial in message.get("trials", []):
            for k, o in enumerate(trial["outputs"]):
                actual = np.fromfile(out / o["file"], dtype=o["dtype"]).reshape(o["shape"])
                want, meta = expected[(trial["trial"], k)]
                bad, err = compare(want, actual, meta["atol"], meta["rtol"])
                failures += bad > 0
                print(f"trial {trial['trial']}{' (repeat)' if trial['repeat'] else ''} {meta['name']}: "
                      f"{bad} of {want.size} outside tolerance, max abs error {err:.3g}")
        if status == "ok" and failures:
            status = "incorrect"
        print(json.dumps({k: message.get(k) for k in ("stage", "message", "tpu_compile", "estimates", "timing",
                                                       "stage_seconds")}, indent=1))
        print(f"verdict: {status} ({seconds:.2f} s for the job)")
        return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
