"""The judge: the trusted side of a pallas evaluation. It never imports candidate code. It holds
the task (a copy of its files), draws the inputs from the server's seeds, runs the task's
reference, and then checks, compiles and runs the program the tracer traced (artifact.py) — that
program and nothing else. The C++ runner (tpu_runner/pallas/pallas_backend.cc) drives it, with
protocol.py's messages:

  judge -> runner  Ready                    jax imported, the TPU target opened
  runner -> judge  JudgeJob                 one evaluation (see evaluation.run_job)
  judge -> runner  Specs                    the inputs' shapes for the tracer
                or Result                   the static check refused the source
  judge -> runner  Reference                expected outputs written (in this folder only)
  runner -> judge  Artifact                 the tracer's program, copied here by the runner
  judge -> runner  Progress..., then Result

The candidate's outputs are compared by the runner. A judge serves `--max-jobs` evaluations
(default 1). The runner starts judges through a fork server (forkserver.py), which has done
`prepare` once: each judge is a fresh fork of it, so jax's import stays out of the evaluation.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import traceback

from . import channel, protocol


def prepare(target_name: str) -> dict:
    """What a judge does before any job, and before the backend (and its threads) exists: the
    environment libtpu reads, the imports, the primitive table. A fork server does it once."""
    from . import tpu_target
    if target_name not in tpu_target.TARGETS:
        raise SystemExit(f"unknown TPU target {target_name!r}; known: {sorted(tpu_target.TARGETS)}")
    if not tpu_target.host_has_tpu():
        for key, value in tpu_target.deviceless_environment(target_name).items():
            os.environ.setdefault(key, value)
    # Before libtpu loads: its logs bounded, and the static LLO profile (the estimated device
    # time) dumped into the judge's own folder (its working folder: on disk, not a tmpfs).
    from . import tpu_estimate
    try:
        dump_dir = tpu_estimate.apply_environment(pathlib.Path.cwd() / "tpu_scratch")
    except OSError:
        dump_dir = None
    from . import artifact, evaluation  # noqa: F401  (imported here, paid once)
    artifact._ensure_modules()
    artifact._primitives()
    _import_interpret_lowering()
    return {"target": target_name, "dump_dir": dump_dir}


def _import_interpret_lowering() -> None:
    """What a job otherwise imports on first use: Pallas's TPU interpreter and, tried and failing
    without its dependencies, its GPU one (the first interpret-mode lowering tries both), the
    topologies module the deviceless target opens with and the MHLO dialect (together ~0.2 CPU-s
    of modules and MLIR dialects). Imports only, no backend: paid by the fork server once, not by
    every job."""
    import importlib
    for module in ("jax._src.pallas.mosaic.interpret.interpret_pallas_call",
                   "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
                   "jax.experimental.topologies", "jaxlib.mlir.dialects.mhlo"):
        try:
            importlib.import_module(module)
        except ImportError:
            pass


def serve(prepared: dict, control_fd, report_fd, seccomp: bool, max_jobs: int = 1, facts: dict | None = None) -> int:
    """Opens the target, says `ready`, and evaluates up to `max_jobs` jobs."""
    channel.open_channels(control_fd, report_fd)
    dump_dir = prepared["dump_dir"]
    if dump_dir is not None:  # a fork server's job folder is emptied between jobs
        from . import tpu_estimate
        tpu_estimate.bounded_log_environment(dump_dir.parent)
        dump_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    from . import evaluation
    target = evaluation.warm_up(prepared["target"])
    import jax
    facts = facts or {}
    channel.send(protocol.Ready(role="judge", target=target.name, on_tpu=bool(target.on_tpu),
                                device_kind=str(target.device_kind), jax=jax.__version__,
                                start_seconds=time.perf_counter() - start,
                                fork_server_job=int(facts.get("fork_server_job", 0)),
                                fork_server_start_seconds=float(facts.get("fork_server_start_seconds", 0.0))))
    for _ in range(max_jobs):
        try:
            message = channel.receive()
        except protocol.ProtocolError as error:
            channel.send(protocol.failure("internal_error", "static_check", f"judge: the runner's job: {error}"))
            return 2
        if message is None:
            return 0
        if not isinstance(message, protocol.JudgeJob):
            channel.send(protocol.failure("internal_error", "static_check",
                                          f"judge: expected a job, got a {message.KIND!r} message"))
            return 2
        try:
            evaluation.run_job(message, target, channel.send, channel.receive, seccomp=seccomp, dump_dir=dump_dir)
        except Exception as error:  # a bug of ours or of the task: say so, as a value
            channel.send(protocol.failure("internal_error", "correctness", f"judge: {type(error).__name__}: {error}",
                                          details=traceback.format_exc().splitlines()[-12:]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="v5e", help="TPU generation to compile for (v5e, v6e)")
    parser.add_argument("--max-jobs", type=int, default=1)
    channel.add_arguments(parser)
    args = parser.parse_args()
    try:
        prepared = prepare(args.target)
    except SystemExit as error:
        channel.open_channels(args.control_fd, args.report_fd)
        channel.send(protocol.Fatal(message=str(error)))
        return 2
    return serve(prepared, args.control_fd, args.report_fd, seccomp=not args.no_seccomp, max_jobs=args.max_jobs)


if __name__ == "__main__":
    sys.exit(main())
