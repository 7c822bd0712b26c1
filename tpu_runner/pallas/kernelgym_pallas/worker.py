"""The pallas worker: one process the C++ runner (tpu_runner/pallas_backend.cc) starts in the
sandbox and drives over stdin/stdout, one JSON object per line.

  worker -> runner  {"event": "ready", ...}           jax imported, the TPU target opened
  runner -> worker  {"job": ...}                       one evaluation (fields: see Job below)
  worker -> runner  {"event": "reference", ...}        expected outputs written, candidate not yet loaded
  runner -> worker  {"go": true}                       the runner has read them; now the candidate runs
  worker -> runner  {"event": "result", ...}           candidate outputs written, compile facts, timing

The worker never judges the candidate: it draws the inputs and runs the reference before any
candidate code is imported, and the runner reads those outputs before saying "go". The
candidate's outputs are compared by the runner, outside this process. A worker serves
`--max-jobs` evaluations (default 1: every evaluation gets a fresh interpreter, so no state a
candidate leaves behind can reach the next one); it is started ahead of time, so jax's import
(about a second) stays out of the evaluation's path.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


_channels = {"in": sys.stdin, "out": sys.__stdout__}


def send(message: dict) -> None:
    _channels["out"].write(json.dumps(message) + "\n")
    _channels["out"].flush()


def receive() -> dict | None:
    line = _channels["in"].readline()
    return json.loads(line) if line else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="v5e", help="TPU generation to compile for (v5e, v6e)")
    parser.add_argument("--max-jobs", type=int, default=1)
    parser.add_argument("--no-seccomp", action="store_true", help="for debugging only")
    parser.add_argument("--control-fd", type=int, help="read jobs here instead of stdin")
    parser.add_argument("--report-fd", type=int, help="write events here instead of stdout")
    args = parser.parse_args()
    if args.control_fd is not None:
        _channels["in"] = os.fdopen(args.control_fd, "r")
    if args.report_fd is not None:
        _channels["out"] = os.fdopen(args.report_fd, "w")
    from . import tpu_target
    if args.target not in tpu_target.TARGETS:
        send({"event": "fatal", "message": f"unknown TPU target {args.target!r}; known: {sorted(tpu_target.TARGETS)}"})
        return 2
    if not tpu_target.host_has_tpu():
        for key, value in tpu_target.deviceless_environment(args.target).items():
            os.environ.setdefault(key, value)
    # Anything the candidate prints must not reach the protocol stream.
    sys.stdout = sys.stderr
    start = time.perf_counter()
    from . import evaluation
    target = evaluation.warm_up(args.target)
    import jax
    send({"event": "ready", "target": target.name, "on_tpu": target.on_tpu, "device_kind": target.device_kind,
          "jax": jax.__version__, "start_seconds": time.perf_counter() - start})
    for _ in range(args.max_jobs):
        message = receive()
        if message is None:
            return 0
        try:
            evaluation.run_job(message["job"], target, send, receive, seccomp=not args.no_seccomp)
        except Exception as error:  # a bug of ours or of the task: say so, as a value
            send({"event": "result", "status": "internal_error", "stage": "correctness",
                  "message": f"worker: {type(error).__name__}: {error}",
                  "details": traceback.format_exc().splitlines()[-12:]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
