"""One evaluation inside the worker, stage by stage (see worker.py for the protocol around it).

Order matters for integrity: the task's inputs and reference outputs exist, and have been handed
to the runner, before the first line of the candidate is imported.
"""
from __future__ import annotations

import hashlib
import pathlib
import time
from typing import Callable

import numpy as np

from . import diagnostics, jaxpr_check, static_check, task_spec, tpu_target

CANDIDATE_MODULE = "kernelgym_candidate"


def warm_up(target_name: str) -> tpu_target.Target:
    """Everything that costs seconds and does not depend on the job: jax, the TPU target, the
    interpreter's first trace. Done before the job arrives."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas  # noqa: F401  (import cost, not per job)
    from jax.experimental.pallas import tpu  # noqa: F401
    target = tpu_target.open_target(target_name)
    if target.on_tpu:
        # The tasks are float32: on a TPU, XLA's default would multiply in one bfloat16 pass and
        # miss the tolerances. (On the CPU, interpret mode and the reference are exact float32
        # anyway, and a deviceless compile at "highest" takes ten times longer.)
        jax.config.update("jax_default_matmul_precision", "highest")
    jnp.zeros(8).block_until_ready()
    return target


def _sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _wire(array: np.ndarray) -> np.ndarray:
    """bfloat16/float16 travel as float32 (what the runner compares); the rest as they are."""
    if array.dtype.kind == "V" or (array.dtype.kind == "f" and array.dtype.itemsize < 4) or \
            str(array.dtype) == "bfloat16":
        return array.astype(np.float32)
    return array


def _write(array: np.ndarray, path: pathlib.Path) -> None:
    np.ascontiguousarray(array).tofile(path)


def _tensor_entry(spec: task_spec.TensorSpec, array: np.ndarray, path: pathlib.Path) -> dict:
    return {"name": spec.name, "dtype": str(array.dtype), "shape": list(array.shape), "file": path.name,
            "atol": spec.atol, "rtol": spec.rtol}


class Outcome(Exception):
    """An expected end of the evaluation (rejected, compile error, crash): carried as a value."""

    def __init__(self, status: str, stage: str, message: str, diags=None, details=None):
        super().__init__(message)
        self.result = {"event": "result", "status": status, "stage": stage, "message": message,
                       "diagnostics": diags or [], "details": details or []}


def run_job(job: dict, target: tpu_target.Target, send: Callable, receive: Callable, seccomp: bool) -> None:
    facts: dict = {"stage_seconds": {}}
    try:
        _run(job, target, send, receive, seccomp, facts)
    except Outcome as outcome:
        outcome.result.update({k: v for k, v in facts.items() if k not in outcome.result})
        send(outcome.result)


def _timed(facts: dict, stage: str):
    class _Timer:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            facts["stage_seconds"][stage] = facts["stage_seconds"].get(stage, 0.0) + time.perf_counter() - self.start
    return _Timer()


def _run(job: dict, target, send, receive, seccomp: bool, facts: dict) -> None:
    import jax
    out_dir = pathlib.Path(job["out_dir"])
    candidate_path = pathlib.Path(job["candidate_path"])
    task = task_spec.load_task(pathlib.Path(job["task_dir"]), job.get("layout", "kernelgym"),
                               job.get("suite", "jaxbench-ext"))
    small, full = task.size_sets["small"], task.size_sets["full"]
    source = candidate_path.read_text()

    # 1. Static checks: read, not run.
    with _timed(facts, "static_check"):
        findings = static_check.check(source)
    if findings:
        raise Outcome("rejected", "static_check", findings[0].message, diagnostics.from_findings(findings))

    # 2. The reference, on inputs drawn from the server's seeds, before the candidate exists here.
    reference = jax.jit(task.reference())
    trials = []
    inputs_per_trial = []
    with _timed(facts, "reference"):
        for t, seed in enumerate(job["seeds"]):
            inputs = task.draw_inputs("small", int(seed))
            expected = [_wire(np.asarray(o)) for o in _as_tuple(reference(*inputs))]
            if len(expected) != len(small.outputs):
                raise AssertionError(f"the reference returned {len(expected)} outputs; the task has {len(small.outputs)}")
            entries = []
            for k, (spec, array) in enumerate(zip(small.outputs, expected)):
                path = out_dir / f"expected_{t}_{k}.bin"
                _write(array, path)
                entries.append(_tensor_entry(spec, array, path))
            trials.append({"seed": int(seed), "inputs_sha256": [_sha256(x) for x in inputs], "outputs": entries})
            inputs_per_trial.append(inputs)
        facts["estimates"] = _estimates(task, target, full.inputs) if job.get("estimates", True) else {}
    send({"event": "reference", "trials": trials, "estimates": facts["estimates"]})
    go = receive()
    if not go or not go.get("go"):
        raise Outcome("internal_error", "correctness", "the runner did not answer the reference phase")

    # 3. From here on the candidate's code is in this process: no new capabilities for it.
    if seccomp:
        from . import confine
        confine.install()
    candidate_file = str(candidate_path)
    with _timed(facts, "compile"):
        try:
            kernel = task_spec.load_function(candidate_path, "kernel", CANDIDATE_MODULE)
        except Exception as error:
            raise Outcome("compile_error", "compile", "the candidate failed to import",
                          diagnostics.from_exception(error, candidate_file, "import"))
        full_specs = full.inputs
        try:
            closed = jax.make_jaxpr(kernel)(*[jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in full_specs])
        except Exception as error:
            raise Outcome("compile_error", "compile", "tracing the candidate at the full shapes failed",
                          diagnostics.from_exception(error, candidate_file, "trace"))
        largest = max((int(np.prod(s.shape)) for s in full_specs), default=1)
        pallas_calls, heavy = jaxpr_check.check(closed, candidate_file, largest)
        if pallas_calls == 0:
            raise Outcome("rejected", "compile", "the candidate contains no pallas_call: the task asks for a Pallas kernel",
                          [{"file": "candidate.py", "line": 0, "column": 0, "severity": "error",
                            "message": "no pallas_call in the traced program"}])
        if heavy:
            diags = [{"file": "candidate.py", "line": line, "column": 0, "severity": "error",
                      "message": f"`{name}` on {size} elements runs outside Pallas (as XLA); do it inside a kernel"}
                     for name, line, size in heavy]
            raise Outcome("rejected", "compile", diags[0]["message"], diags)
        facts["pallas_calls"] = pallas_calls
        pallas_lines = jaxpr_check.pallas_call_lines(closed, candidate_file)
        try:
            vmem = jaxpr_check.vmem_estimate(closed)
        except Exception:  # an estimate: its absence is no verdict
            vmem = 0
        # The real TPU compile (Pallas -> Mosaic -> libtpu) at the task's full shapes.
        try:
            compiled = tpu_target.compile_for(target, kernel, full_specs)
        except Exception as error:
            raise Outcome("compile_error", "compile", f"compiling for TPU {target.name} ({target.device_kind}) failed",
                          diagnostics.from_exception(error, candidate_file, "mosaic", pallas_lines))
        send({"event": "progress", "stage": "compiled"})
        facts["tpu_compile"] = {"target": target.name, "device_kind": target.device_kind,
                                "deviceless": not target.on_tpu, "seconds": compiled.seconds,
                                "memory": dict(compiled.memory, vmem_estimate_bytes=float(vmem))}

    # 4. Correctness on the small shapes: on the chip when there is one, else TPU interpret mode.
    outputs_meta = []
    with _timed(facts, "correctness"):
        for t, inputs in enumerate(inputs_per_trial):
            repeats = 2 if t == 0 else 1  # trial 0 runs twice: a second run must give the same bits
            for r in range(repeats):
                send({"event": "progress", "stage": "trial", "trial": t, "repeat": r})
                arrays = _run_candidate(kernel, inputs, target, candidate_file, pallas_lines)
                if len(arrays) != len(small.outputs):
                    raise Outcome("incorrect", "correctness",
                                  f"kernel returned {len(arrays)} outputs; the task has {len(small.outputs)}")
                entries = []
                arrays = [_wire(a) for a in arrays]
                for k, array in enumerate(arrays):
                    path = out_dir / f"candidate_{t}_{k}{'_repeat' if r else ''}.bin"
                    _write(array, path)
                    entries.append({"dtype": str(array.dtype), "shape": list(array.shape), "file": path.name})
                outputs_meta.append({"trial": t, "repeat": r, "outputs": entries,
                                     "inputs_sha256": [_sha256(x) for x in inputs]})
    result = {"event": "result", "status": "ok", "stage": "correctness", "message": "", "trials": outputs_meta}

    # 5. Time: only a TPU gives a representative time.
    if job.get("run_timing", True) and target.on_tpu:
        from . import tpu_timing
        with _timed(facts, "timing"):
            result["timing"] = tpu_timing.measure(task, kernel, reference, target, job)
    else:
        result["timing"] = {"representative": False, "clock": "none",
                            "reason": "no TPU on this host: interpret-mode time says nothing about a TPU's"}
    result.update(facts)
    send(result)


def _run_candidate(kernel, inputs, target, candidate_file, pallas_lines) -> list[np.ndarray]:
    import jax
    from jax.experimental.pallas import tpu as pltpu
    try:
        if target.on_tpu:
            out = jax.jit(kernel)(*inputs)
        else:
            from jax._src.pallas.mosaic.interpret import interpret_pallas_call as interp
            params = pltpu.InterpretParams(detect_races=True, out_of_bounds_reads="raise",
                                           uninitialized_memory="nan")
            with pltpu.force_tpu_interpret_mode(params):
                out = jax.jit(kernel)(*inputs)
                jax.block_until_ready(out)
            races = getattr(interp, "races", None)
            if races is not None and getattr(races, "races_found", False):
                raise Outcome("incorrect", "correctness",
                              "TPU interpret mode detected a data race between grid steps or DMAs")
        return [np.asarray(o) for o in _as_tuple(out)]
    except Outcome:
        raise
    except Exception as error:
        raise Outcome("crashed", "correctness", "the kernel raised while running (TPU interpret mode)"
                      if not target.on_tpu else "the kernel raised while running on the TPU",
                      diagnostics.from_exception(error, candidate_file, "run", pallas_lines))


def _estimates(task, target, full_specs) -> dict:
    """XLA's own estimate for the reference on the target (it has none for a Mosaic kernel): a
    scale for the candidate's eventual time, labelled an estimate, never a measurement."""
    out = {}
    try:
        compiled = tpu_target.compile_for(target, task.reference(), full_specs)
        seconds = compiled.cost.get("optimal_seconds", 0.0)
        if seconds > 0:
            out["reference_estimated_tpu_us"] = seconds * 1e6
        out["reference_flops"] = compiled.cost.get("flops", 0.0)
        out["reference_bytes_accessed"] = compiled.cost.get("bytes accessed", 0.0)
    except Exception as error:  # an estimate is optional; its absence is reported, not fatal
        out["reference_estimate_error"] = f"{type(error).__name__}: {str(error)[:200]}"
    return out
