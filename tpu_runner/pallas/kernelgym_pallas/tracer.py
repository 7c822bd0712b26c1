"""The tracer: the only process that runs the candidate's Python. It is given the candidate's
source and the shapes and dtypes of the task's inputs at each size set, and nothing else: no
task files, no inputs, no reference, no expected outputs, in memory or in its file view. It
traces `kernel` at every size set and writes the traced programs (artifact.py) to its job folder.
Whatever it says is a claim: the judge checks, compiles and runs that program itself, and a
tracer that lies (about the program, or about an error) only changes which program is judged.

  tracer -> runner  Ready                    jax imported
  runner -> tracer  TraceJob                 candidate_path, size_sets, artifact_path
  tracer -> runner  Traced                   the programs written
                 or Result                   compile_error (import, trace), rejected (cannot be handed over)
(protocol.py defines the messages.)
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import traceback

from . import channel, protocol

CANDIDATE_MODULE = "kernelgym_candidate"


def warm_up(target: str = "v5e") -> None:
    """jax, Pallas, the primitive table and a first trace: paid before the job arrives."""
    import jax
    import jax.numpy as jnp
    from . import artifact
    artifact._ensure_modules()
    artifact._primitives()
    answer_as_the_target(target)
    jax.make_jaxpr(lambda x: x + 1)(jax.ShapeDtypeStruct((8,), jnp.float32))


def answer_as_the_target(target: str) -> None:
    """Pallas asks the default device for the chip's facts while some kernels are traced
    (`pltpu.emit_pipeline`: "Unsupported TPU device kind: cpu", an honest kernel refused as a
    compile error, red team round 14). The tracer has no TPU (and no libtpu client: it holds the
    candidate), so its CPU device answers with the target chip's facts, which the judge's
    deviceless compile for that chip then checks."""
    from jax._src.pallas.mosaic import tpu_info
    chips = {"v5e": tpu_info.ChipVersion.TPU_V5E, "v6e": tpu_info.ChipVersion.TPU_V6E}
    chip = chips.get(target, tpu_info.ChipVersion.TPU_V5E)
    tpu_info.registry["cpu"] = lambda: tpu_info.get_tpu_info_for_chip(chip, 1)


def trace(job: protocol.TraceJob, seccomp: bool):
    import jax
    import jax.numpy as jnp
    from . import artifact, custom_rules, diagnostics, task_spec
    stage_seconds: dict[str, float] = {}

    def failure(status: str, message: str, diags) -> protocol.Result:
        return protocol.failure(status, "compile", message, protocol.diagnostics_of(diags), stage_seconds=stage_seconds)

    candidate_path = pathlib.Path(job.candidate_path)
    candidate_file = str(candidate_path)
    if seccomp:
        from . import confine
        confine.install()
    started = time.perf_counter()
    try:
        kernel = task_spec.load_function(candidate_path, "kernel", CANDIDATE_MODULE)
    except Exception as error:
        return failure("compile_error", "the candidate failed to import",
                       diagnostics.from_exception(error, candidate_file, "import"))
    stage_seconds["import"] = time.perf_counter() - started
    programs = {}
    for name, specs in job.size_sets.items():
        started = time.perf_counter()
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in specs]
        try:
            programs[name] = custom_rules.without_custom_rules(jax.make_jaxpr(kernel)(*args))
        except Exception as error:
            return failure("compile_error", f"tracing the candidate at the {name} sizes failed",
                           diagnostics.from_exception(error, candidate_file, "trace"))
        stage_seconds[f"trace_{name}"] = time.perf_counter() - started
    started = time.perf_counter()
    try:
        data = artifact.dump(programs, candidate_file)
    except Exception as error:
        return failure("rejected",
                       f"the traced program cannot be handed to the judge: {type(error).__name__}: {error}"[:500], [])
    path = pathlib.Path(job.artifact_path)
    path.write_bytes(data)
    stage_seconds["export"] = time.perf_counter() - started
    return protocol.Traced(file=path.name, bytes=len(data), stage_seconds=stage_seconds)


def serve(control_fd, report_fd, seccomp: bool, facts: dict | None = None) -> int:
    """Says `ready` (warm_up done before), traces one job, reports."""
    channel.open_channels(control_fd, report_fd)
    import jax
    facts = facts or {}
    channel.send(protocol.Ready(role="tracer", target="", on_tpu=False, device_kind="", jax=jax.__version__,
                                start_seconds=float(facts.get("start_seconds", 0.0)),
                                fork_server_job=int(facts.get("fork_server_job", 0)),
                                fork_server_start_seconds=float(facts.get("fork_server_start_seconds", 0.0))))
    try:
        message = channel.receive()
    except protocol.ProtocolError as error:
        channel.send(protocol.failure("crashed", "compile", f"tracer: the runner's job: {error}"))
        return 2
    if message is None:
        return 0
    if not isinstance(message, protocol.TraceJob):
        channel.send(protocol.failure("crashed", "compile", f"tracer: expected a trace job, got {message.KIND!r}"))
        return 2
    try:
        channel.send(trace(message, seccomp=seccomp))
    except Exception as error:  # ours, or the candidate's doing: a value either way
        channel.send(protocol.failure("crashed", "compile", f"tracer: {type(error).__name__}: {error}"[:500],
                                      details=traceback.format_exc().splitlines()[-12:]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    channel.add_arguments(parser)
    parser.add_argument("--target", default="v5e", help="the TPU generation compiled for (v5e, v6e)")
    args = parser.parse_args()
    started = time.perf_counter()
    warm_up(args.target)
    return serve(args.control_fd, args.report_fd, seccomp=not args.no_seccomp,
                 facts={"start_seconds": time.perf_counter() - started})


if __name__ == "__main__":
    sys.exit(main())
