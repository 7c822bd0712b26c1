"""The tracer: the only process that runs the candidate's Python. It is given the candidate's
source and the shapes and dtypes of the task's inputs at each size set, and nothing else: no
task files, no inputs, no reference, no expected outputs, in memory or in its file view. It
traces `kernel` at every size set and writes the traced programs (artifact.py) to its job folder.
Whatever it says is a claim: the judge checks, compiles and runs that program itself, and a
tracer that lies (about the program, or about an error) only changes which program is judged.

  tracer -> runner  {"event": "ready", ...}            jax imported
  runner -> tracer  {"job": {candidate_path, size_sets, artifact_path}}
  tracer -> runner  {"event": "traced", "file", "bytes", "stage_seconds"}
                 or {"event": "result", "status": "compile_error", "diagnostics", ...}
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import traceback

from . import channel

CANDIDATE_MODULE = "kernelgym_candidate"


def warm_up() -> None:
    """jax, Pallas, the primitive table and a first trace: paid before the job arrives."""
    import jax
    import jax.numpy as jnp
    from . import artifact
    artifact._ensure_modules()
    artifact._primitives()
    jax.make_jaxpr(lambda x: x + 1)(jax.ShapeDtypeStruct((8,), jnp.float32))


def trace(job: dict, seccomp: bool) -> dict:
    import jax
    import jax.numpy as jnp
    from . import artifact, diagnostics, task_spec
    facts = {"stage_seconds": {}}
    candidate_path = pathlib.Path(job["candidate_path"])
    candidate_file = str(candidate_path)
    if seccomp:
        from . import confine
        confine.install()
    started = time.perf_counter()
    try:
        kernel = task_spec.load_function(candidate_path, "kernel", CANDIDATE_MODULE)
    except Exception as error:
        return {"event": "result", "status": "compile_error", "stage": "compile",
                "message": "the candidate failed to import",
                "diagnostics": diagnostics.from_exception(error, candidate_file, "import"), **facts}
    facts["stage_seconds"]["import"] = time.perf_counter() - started
    programs = {}
    for name, specs in job["size_sets"].items():
        started = time.perf_counter()
        args = [jax.ShapeDtypeStruct(tuple(s["shape"]), jnp.dtype(s["dtype"])) for s in specs]
        try:
            programs[name] = jax.make_jaxpr(kernel)(*args)
        except Exception as error:
            return {"event": "result", "status": "compile_error", "stage": "compile",
                    "message": f"tracing the candidate at the {name} sizes failed",
                    "diagnostics": diagnostics.from_exception(error, candidate_file, "trace"), **facts}
        facts["stage_seconds"][f"trace_{name}"] = time.perf_counter() - started
    started = time.perf_counter()
    try:
        data = artifact.dump(programs, candidate_file)
    except Exception as error:
        return {"event": "result", "status": "rejected", "stage": "compile",
                "message": f"the traced program cannot be handed to the judge: {type(error).__name__}: {error}"[:500],
                "diagnostics": [], **facts}
    path = pathlib.Path(job["artifact_path"])
    path.write_bytes(data)
    facts["stage_seconds"]["export"] = time.perf_counter() - started
    return {"event": "traced", "file": path.name, "bytes": len(data), **facts}


def serve(control_fd, report_fd, seccomp: bool, facts: dict | None = None) -> int:
    """Says `ready` (warm_up done before), traces one job, reports."""
    channel.open_channels(control_fd, report_fd)
    import jax
    channel.send({"event": "ready", "jax": jax.__version__, **(facts or {})})
    message = channel.receive()
    if message is None:
        return 0
    try:
        channel.send(trace(message["job"], seccomp=seccomp))
    except Exception as error:  # ours, or the candidate's doing: a value either way
        channel.send({"event": "result", "status": "crashed", "stage": "compile",
                      "message": f"tracer: {type(error).__name__}: {error}"[:500],
                      "details": traceback.format_exc().splitlines()[-12:]})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    channel.add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    warm_up()
    return serve(args.control_fd, args.report_fd, seccomp=not args.no_seccomp,
                 facts={"start_seconds": time.perf_counter() - started})


if __name__ == "__main__":
    sys.exit(main())
