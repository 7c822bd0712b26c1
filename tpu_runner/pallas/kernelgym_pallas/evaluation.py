"""One evaluation inside the judge, stage by stage (judge.py has the channel around it; protocol.py
the messages). The runner's stages (tpu_runner/pallas/pallas_stages.h) match these one to one:
static check, reference + trace, structure, compile, estimate, correctness, timing.

The judge never imports candidate code. What it runs of the candidate is the program the tracer
traced, loaded by artifact.py: the same object is structure-checked (jaxpr_check.py), compiled
for the TPU and run for the answers the runner compares. Order matters: the inputs and the
reference's outputs exist, and the runner has read them, before the judge looks at the program.
"""
from __future__ import annotations

import copy
import hashlib
import numbers
import pathlib
import time
from typing import Callable

import numpy as np

from . import (diagnostics, jaxpr_check, layout_cuts, prefetch_coverage, program_identity, protocol, reference_needs,
               static_check, task_spec, tpu_estimate, tpu_numerics, tpu_target, work_ratio)

# The size sets whose answers are compared (every task has both; a JAXBench case, with one
# shape, has them equal and is checked on that one): a kernel that hard-codes one shape fails
# the other. "full" is compiled for the TPU (and timed, and checked, on a TPU host).
CHECKED_SETS = ("small", "check")
# Output blocks drawn from the seed for the full-size sample, beside each output's last (docs/
# pallas.md, "A sample of the full-size program itself": what one more would buy and cost).
SAMPLED_BLOCKS = 1


def warm_up(target_name: str) -> tpu_target.Target:
    """Everything that costs seconds and does not depend on the job: jax, the TPU target, the
    primitive table the program is read with, the interpreter's first trace. Done before the job
    arrives."""
    import jax
    import jax.numpy as jnp
    from . import artifact
    artifact._ensure_modules()
    artifact._primitives()
    target = tpu_target.open_target(target_name)
    jnp.zeros(8).block_until_ready()
    return target


def exact_reference(fn: Callable) -> Callable:
    """The task's reference as its task defines it: float32 contractions at HIGHEST precision
    (exact float32 on a TPU, six MXU passes), so that the expected outputs, the reference's
    estimate and, on a TPU host, its timing all mean the task's arithmetic. The candidate's program
    keeps its own precisions: a float32 dot it leaves at DEFAULT is one bfloat16 pass on the chip,
    and is checked (tpu_numerics) and priced as one.

    A contraction of bfloat16 (or narrower) operands is exact at one pass already (the products fit
    in float32, which accumulates them), so HIGHEST means nothing for it and it is left at DEFAULT:
    the same answers, the program XLA runs at the task's dtypes. It matters for ragged dots:
    libtpu's own ragged-dot kernel, asked for HIGHEST on bfloat16 operands, emits a float32-precision
    matmul of bfloat16 vectors that Mosaic refuses ("Bad lhs type"), so the reference could not be
    compiled for its estimate (jaxbench-p/megablox_gmm and ragged_dot in bfloat16)."""
    import functools
    import jax
    from jax._src import core

    @functools.wraps(fn)
    def reference(*args):
        with jax.default_matmul_precision("highest"):
            closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
        out = core.jaxpr_as_fun(_narrow_contractions_at_default(closed))(*jax.tree_util.tree_leaves(args))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), out)
    return reference


# The contractions whose `precision` parameter decides how many MXU passes a float32 operand takes.
_CONTRACTIONS = ("dot_general", "ragged_dot_general", "conv_general_dilated")


def _narrow_contractions_at_default(closed_jaxpr):
    """The program with every contraction whose floating operands are all 16 bits or narrower at
    DEFAULT precision, at any depth (exact_reference says why); float32 ones keep their precision."""
    import jax.numpy as jnp

    def narrow(eqn) -> bool:
        dtypes = [v.aval.dtype for v in eqn.invars[:2]]
        return all(jnp.issubdtype(d, jnp.floating) and jnp.dtype(d).itemsize <= 2 for d in dtypes)

    def walk(jaxpr):
        eqns = []
        for eqn in jaxpr.eqns:
            params = {k: jaxpr_check._map_jaxprs(v, walk) for k, v in eqn.params.items()}
            if eqn.primitive.name in _CONTRACTIONS and "precision" in params and narrow(eqn):
                params["precision"] = None
            eqns.append(eqn.replace(params=params))
        return jaxpr.replace(eqns=eqns)

    return closed_jaxpr.replace(jaxpr=walk(closed_jaxpr.jaxpr))


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


def _tensor_entry(spec: task_spec.TensorSpec, array: np.ndarray, path: pathlib.Path) -> protocol.ExpectedOutput:
    return protocol.ExpectedOutput(name=spec.name, dtype=str(array.dtype), shape=list(array.shape), file=path.name,
                                   atol=float(spec.atol), rtol=float(spec.rtol))


def checked_sets(task: task_spec.PallasTask) -> list[str]:
    """The size sets whose answers are compared, without repeats of one shape."""
    shapes = lambda name: [list(s.shape) for s in task.size_sets[name].inputs]
    out = []
    for name in CHECKED_SETS:
        if all(shapes(name) != shapes(other) for other in out):
            out.append(name)
    return out


def trial_plan(task: task_spec.PallasTask, seeds: list[int]) -> list[tuple[str, int]]:
    """(size set, seed) per trial: the seeds in turn, the checked size sets in turn, every checked
    size set at least once."""
    sets = checked_sets(task)
    count = max(len(seeds), len(sets))
    return [(sets[t % len(sets)], int(seeds[t % len(seeds)])) for t in range(count)]


def _specs(shape_set: task_spec.ShapeSet) -> list[protocol.InputSpec]:
    return [protocol.InputSpec(shape=[int(d) for d in s.shape], dtype=str(np.dtype(s.dtype))) for s in shape_set.inputs]


class Outcome(Exception):
    """An expected end of the evaluation (rejected, compile error, crash): carried as a value."""

    def __init__(self, status: str, stage: str, message: str, diags=None, details=None):
        super().__init__(message)
        self.result = protocol.failure(status, stage, message, protocol.diagnostics_of(diags or []), details)


def _with_facts(result: protocol.Result, facts: dict) -> protocol.Result:
    """The facts gathered on the way (stage times, the compile, the estimate) on the final message."""
    result.stage_seconds = {**facts["stage_seconds"], **result.stage_seconds}
    result.tpu_compile = result.tpu_compile or facts.get("tpu_compile")
    result.estimate = result.estimate or facts.get("estimate")
    result.pallas_calls = result.pallas_calls or int(facts.get("pallas_calls", 0))
    return result


def run_job(job: protocol.JudgeJob, target: tpu_target.Target, send: Callable, receive: Callable, seccomp: bool,
            dump_dir=None) -> None:
    facts: dict = {"stage_seconds": {}}
    try:
        _run(job, target, send, receive, seccomp, facts, dump_dir)
    except Outcome as outcome:
        send(_with_facts(outcome.result, facts))


def _timed(facts: dict, stage: str):
    class _Timer:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            facts["stage_seconds"][stage] = facts["stage_seconds"].get(stage, 0.0) + time.perf_counter() - self.start
    return _Timer()


def _run(job: protocol.JudgeJob, target, send, receive, seccomp: bool, facts: dict, dump_dir=None) -> None:
    import jax
    out_dir = pathlib.Path(job.out_dir)
    task = task_spec.load_task(pathlib.Path(job.task_dir), job.layout, job.suite)
    full = task.size_sets["full"]

    # 1. The static check: a first filter, read, not run (the source is never imported here).
    if job.static_check:
        with _timed(facts, "static_check"):
            findings = static_check.check(pathlib.Path(job.candidate_path).read_text(errors="replace"))
        if findings:
            raise Outcome("rejected", "static_check", findings[0].message, diagnostics.from_findings(findings))
    plan = trial_plan(task, [int(s) for s in job.seeds])
    traced_sets = list(dict.fromkeys([name for name, _ in plan] + ["full"]))
    send(protocol.Specs(size_sets={name: _specs(task.size_sets[name]) for name in traced_sets}))

    # 2. The reference, on inputs drawn from the server's seeds, while the tracer traces.
    reference = jax.jit(exact_reference(task.reference()))
    trials = []
    inputs_per_trial = []
    expected_per_trial = []
    with _timed(facts, "reference"):
        for t, (set_name, seed) in enumerate(plan):
            shape_set = task.size_sets[set_name]
            inputs = task.draw_inputs(set_name, seed)
            expected = [_wire(np.asarray(o)) for o in _as_tuple(reference(*inputs))]
            if len(expected) != len(shape_set.outputs):
                raise AssertionError(f"the reference returned {len(expected)} outputs; the task has "
                                     f"{len(shape_set.outputs)}")
            entries = []
            for k, (spec, array) in enumerate(zip(shape_set.outputs, expected)):
                path = out_dir / f"expected_{t}_{k}.bin"
                _write(array, path)
                entries.append(_tensor_entry(spec, array, path))
            trials.append(protocol.ReferenceTrial(seed=int(seed), size_set=set_name,
                                                  inputs_sha256=[_sha256(x) for x in inputs], outputs=entries))
            inputs_per_trial.append(inputs)
            expected_per_trial.append(expected)
    reference_estimate = None
    if job.estimate_reference:  # the runner caches it by the task's and the judge's content
        with _timed(facts, "reference_estimate"):
            reference_estimate = _estimates(task, target, full.inputs, dump_dir)
    send(protocol.Reference(trials=trials, estimate=reference_estimate))
    message = receive()
    if not isinstance(message, protocol.Artifact):
        raise Outcome("internal_error", "compile", "the runner sent no traced program")

    # 3. From here on the judge reads what the candidate's process wrote: no new capabilities.
    if seccomp:
        from . import confine
        confine.install()
    programs = _load_programs(out_dir / pathlib.Path(message.file).name, task, traced_sets, facts)
    _check_structure(programs, task, traced_sets, facts, plan[0][1])

    # 4. The real TPU compile (Pallas -> Mosaic -> libtpu) of the full-size program, or the facts of
    # an earlier compile of the same content (the runner keeps them by the program's canonical key).
    from jax._src import core
    pallas_lines = jaxpr_check.pallas_call_lines(programs["full"])
    cached = _cached_compile(programs["full"], job, dump_dir, send, receive, facts)
    with _timed(facts, "compile"):
        mosaic_full = core.jaxpr_as_fun(jaxpr_check.set_interpret(programs["full"], False))
        if cached is not None:
            compiled = None
            facts["tpu_compile"] = cached.tpu_compile
        else:
            compiled = _compile(programs["full"], target, full, dump_dir, pallas_lines, facts)
        send(protocol.Progress(stage="compiled", trial=-1, repeat=0))
    # The full-size program is estimated but, off a TPU, never run: its grid must at least write
    # every block of its outputs (one that skips blocks only there is wrong only there).
    try:
        uncovered = jaxpr_check.uncovered_outputs(programs["full"])
    except Exception as error:  # an index map that cannot be evaluated cannot be vouched for
        raise Outcome("rejected", "compile", "the blocks the full-size program writes could not be worked out from "
                      f"its index maps ({type(error).__name__}: {str(error)[:200]})")
    if uncovered:
        raise Outcome("incorrect", "correctness", uncovered[0])
    estimate = None
    if job.estimate_candidate:
        with _timed(facts, "estimate"):
            estimate = cached.estimate if cached is not None else _candidate_estimate(compiled, programs["full"],
                                                                                     target, dump_dir)
    if cached is None and facts.get("compile_key"):
        # Kept by the runner as the estimator gave them, before any of the program runs.
        send(protocol.CompileFacts(tpu_compile=copy.deepcopy(facts["tpu_compile"]), estimate=copy.deepcopy(estimate)))
    if estimate is not None:
        unproven = facts.get("identity_unproven", [])
        if unproven:  # the figure is for a program not shown to be the checked one: never paid
            estimate.trusted = False
            estimate.reasons += [f"the full-size program is not shown to be the checked one: {why}"
                                 for why in unproven]
        facts["estimate"] = estimate

    # 5. Correctness on the checked size sets: on the chip when there is one, else TPU interpret mode.
    run = {name: _runner(programs[name], target) for name in dict.fromkeys(name for name, _ in plan)}
    outputs_meta = []
    checked_agree = True  # the judge's own reading of the runner's comparison: whether to go on
    with _timed(facts, "correctness"):
        for t, inputs in enumerate(inputs_per_trial):
            set_name = plan[t][0]
            shape_set = task.size_sets[set_name]
            repeats = 2 if t == 0 else 1  # trial 0 runs twice: a second run must give the same bits
            for r in range(repeats):
                send(protocol.Progress(stage="trial", trial=t, repeat=r))
                arrays = _run_candidate(run[set_name], inputs, target, pallas_lines)
                if len(arrays) != len(shape_set.outputs):
                    raise Outcome("incorrect", "correctness",
                                  f"kernel returned {len(arrays)} outputs; the task has {len(shape_set.outputs)}")
                entries = []
                arrays = [_wire(a) for a in arrays]
                checked_agree = checked_agree and _within_tolerance(shape_set.outputs, expected_per_trial[t], arrays)
                for k, array in enumerate(arrays):
                    path = out_dir / f"candidate_{t}_{k}{'_repeat' if r else ''}.bin"
                    _write(array, path)
                    entries.append(protocol.OutputFile(dtype=str(array.dtype), shape=list(array.shape), file=path.name))
                outputs_meta.append(protocol.CandidateRun(trial=t, repeat=r, outputs=entries,
                                                          inputs_sha256=[_sha256(x) for x in inputs]))
    # 6. Off a TPU the full-size program is never run whole: where its estimate would be paid, the
    # grid steps that write a sample of its output blocks are run (full_size_sample.py) and those
    # blocks compared with the task's starter's on the same full-size inputs. Not when a checked
    # run is already wrong: the runner's comparison says so, with the mismatch report.
    sample_details = []
    if not target.on_tpu and estimate is not None and estimate.trusted and checked_agree:
        send(protocol.Progress(stage="full_size_sample", trial=-1, repeat=0))  # its own CPU-time window
        with _timed(facts, "full_size_sample"):
            sample_details = _full_size_sample(task, programs["full"], int(plan[0][1]), estimate)
    result = protocol.failure("ok", "correctness", "", details=sample_details)
    result.trials = outputs_meta

    # 7. On a TPU host the program that is timed is also checked, at the full sizes, then timed.
    if target.on_tpu:
        with _timed(facts, "full_size_check"):
            mismatch = _full_size_check(task, mosaic_full, reference, target, int(job.timing_seed) or 1)
        if mismatch:
            raise Outcome("incorrect", "correctness", mismatch)
    if job.run_timing and target.on_tpu:
        from . import tpu_timing
        with _timed(facts, "timing"):
            result.timing = _timing(tpu_timing.measure(task, mosaic_full, reference, target,
                                                          {"timing_seed": job.timing_seed}))
    else:
        result.timing = protocol.Timing(representative=False, clock="none", samples=[], seconds=0.0, profile={},
                                        reason="no TPU on this host: interpret-mode time says nothing about a TPU's")
    send(_with_facts(result, facts))


def _compile_context(job: protocol.JudgeJob, dump_dir) -> dict:
    """What the compile's facts and the estimate depend on in the judge besides the program (the
    runner's part of the key holds the judge's code, the packages, the target and the task)."""
    return {"estimate_candidate": bool(job.estimate_candidate), "static_profile": dump_dir is not None}


def _cached_compile(program, job: protocol.JudgeJob, dump_dir, send, receive, facts: dict):
    """The runner's facts of an earlier compile of this program's content (CompileFacts), or None:
    compile here. A program the key's writer cannot write whole is compiled afresh."""
    from . import program_key
    with _timed(facts, "compile_key"):
        try:
            key = program_key.digest(program, _compile_context(job, dump_dir))
        except program_key.Uncacheable:
            return None
    facts["compile_key"] = key
    send(protocol.CompileKey(program=key))
    answer = receive()
    if not isinstance(answer, protocol.CompileFacts):
        raise Outcome("internal_error", "compile", "the runner did not answer the program's key")
    if answer.tpu_compile is None or (answer.estimate is not None) != bool(job.estimate_candidate):
        return None
    return answer


def _compile(program, target, full, dump_dir, pallas_lines, facts: dict):
    """The deviceless (or, on a TPU host, the chip's) compile of the full-size program, and its facts."""
    from jax._src import core
    if dump_dir is not None:
        tpu_estimate.clear_dump(dump_dir)  # this compile's static profile, and no other's
    # The compile that is estimated leaves out each kernel's declared `pl.CostEstimate`: XLA's
    # model prices a Mosaic call by that declaration, so the XLA ops' figure would hold the
    # kernel a second time, at a size the candidate writes. (The timed program on a TPU host
    # keeps it: there it may guide XLA's scheduling, and the chip's clock is the judge.)
    estimated_full = core.jaxpr_as_fun(jaxpr_check.set_pallas_params(program, interpret=False, cost_estimate=None))
    try:
        compiled = tpu_target.compile_for(target, estimated_full, full.inputs)
    except Exception as error:
        raise Outcome("compile_error", "compile", f"compiling for TPU {target.name} ({target.device_kind}) failed",
                      diagnostics.from_exception(error, "candidate.py", "mosaic", pallas_lines))
    try:
        vmem = jaxpr_check.vmem_estimate(program)
    except Exception:  # an estimate: its absence is no verdict
        vmem = 0
    facts["tpu_compile"] = protocol.TpuCompile(
        target=target.name, device_kind=target.device_kind, deviceless=not target.on_tpu,
        seconds=float(compiled.seconds),
        memory={k: float(v) for k, v in dict(compiled.memory, vmem_estimate_bytes=float(vmem)).items()
                if isinstance(v, numbers.Real)})
    return compiled


def _timing(measured: dict) -> protocol.Timing:
    """tpu_timing.measure's figures as the protocol's record."""
    return protocol.Timing(
        representative=bool(measured.get("representative", False)), clock=str(measured.get("clock", "none")),
        reason=str(measured.get("reason", "")), seconds=float(measured.get("seconds", 0.0)),
        samples=[protocol.TimingSample(reference_ns=float(s.get("reference_ns", 0.0)),
                                       candidate_ns=float(s.get("candidate_ns", 0.0)))
                 for s in measured.get("samples", [])],
        profile={k: float(v) for k, v in (measured.get("profile") or {}).items() if isinstance(v, numbers.Real)})


def _load_programs(path: pathlib.Path, task, traced_sets: list[str], facts: dict) -> dict:
    """The tracer's programs, one per size set, each taking exactly the task's inputs."""
    from . import artifact
    with _timed(facts, "load"):
        try:
            programs = artifact.load(path.read_bytes())
        except (artifact.ArtifactError, OSError) as error:
            raise Outcome("rejected", "compile", f"the traced program was refused: {error}")
    for name in traced_sets:
        if name not in programs:
            raise Outcome("rejected", "compile", f"the traced program has no version for the {name} sizes")
        want = [(tuple(s.shape), np.dtype(s.dtype)) for s in task.size_sets[name].inputs]
        have = [(tuple(a.shape), np.dtype(a.dtype)) for a in programs[name].in_avals]
        if want != have:
            raise Outcome("rejected", "compile", f"the traced program for the {name} sizes takes {have}; "
                                                 f"the task's inputs are {want}")
    return programs


def _largest(shape_set) -> int:
    return max((int(np.prod(s.shape, dtype=np.int64)) for s in shape_set.inputs), default=1)


def _check_structure(programs: dict, task, traced_sets: list[str], facts: dict, seed: int) -> None:
    with _timed(facts, "structure_check"):
        for name in traced_sets:
            largest = _largest(task.size_sets[name])
            diags = jaxpr_check.verdict(jaxpr_check.check(programs[name], largest), largest, name)
            if diags:
                raise Outcome("rejected", "compile", diags[0]["message"], diags)
        facts["pallas_calls"] = jaxpr_check.check(programs["full"], _largest(task.size_sets["full"])).pallas_calls
        for name in traced_sets:
            for problem in tpu_numerics.unsupported(programs[name]):
                raise Outcome("rejected", "compile", f"[{name} sizes] {problem}")
            # The task's own dtypes are what is checked and paid: a float32 answer to a bfloat16 task
            # would be compared after both travel as float32, and priced at another width.
            specs, avals = task.size_sets[name].outputs, programs[name].out_avals
            for spec, aval in zip(specs, avals):
                if np.dtype(aval.dtype) != np.dtype(spec.dtype) or tuple(aval.shape) != tuple(spec.shape):
                    raise Outcome("rejected", "compile",
                                  f"[{name} sizes] output '{spec.name}' is {np.dtype(aval.dtype)}{list(aval.shape)}; "
                                  f"the task's is {np.dtype(spec.dtype)}{list(spec.shape)}")
        reference_name = traced_sets[0]
        reference_skeleton = jaxpr_check.skeleton(programs[reference_name])
        for name in traced_sets[1:]:
            other = jaxpr_check.skeleton(programs[name])
            if other != reference_skeleton:
                where = jaxpr_check.first_difference(reference_skeleton, other)
                raise Outcome("rejected", "compile",
                              f"the program traced at the {name} sizes is not the one traced at the {reference_name} "
                              f"sizes ({where}): the program that is compiled and timed must be the one whose "
                              f"answers are checked, up to its shapes")
        _check_identity(programs, task, facts, seed)


def _drawn(task, size_set: str, wanted: list[int], seed: int) -> list[np.ndarray]:
    """The task's inputs at positions `wanted` of a size set, drawn from the job's first seed (the
    candidate cannot know it, so a table cannot be made to cover the blocks for one known draw)."""
    if task.layout == "jaxbench":  # its module draws every input at once
        held = sum(int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
                   for s in task.size_sets[size_set].inputs)
        if held > prefetch_coverage.MAX_TABLE_INPUT_BYTES:
            raise ValueError(f"the case's inputs hold {held >> 20} MiB, drawn together, more than "
                             f"{prefetch_coverage.MAX_TABLE_INPUT_BYTES >> 20}")
        drawn = task.draw_inputs(size_set, seed)
        return [drawn[k] for k in wanted]
    from .inputs import draw
    specs = task.size_sets[size_set].inputs
    return [draw(specs[k], np.random.default_rng([seed, k])) for k in wanted]


def _check_identity(programs: dict, task, facts: dict, seed: int) -> None:
    """Whether the full-size program (compiled and estimated; off a TPU never run) is the checked
    programs' template at the full sizes (program_identity.py). A difference in anything but
    numbers is refused; numbers that do not follow the sizes leave the estimate untrusted."""
    checked = [name for name in checked_sets(task)]
    if len(checked) < 2:
        facts["identity_unproven"] = ["the task is checked at one shape only, so the full-size program cannot be "
                                      "shown to be the checked one"]
        return
    sizes = {name: task.size_sets[name].sizes for name in (*checked, "full")}
    identity = program_identity.compare(programs, sizes, fit_sets=tuple(checked), target="full")
    if not identity.structural:
        # Blocks named through scalar-prefetched tables: the tables computed on the task's inputs.
        with_tables = {}
        identity.unproven += [p for p in prefetch_coverage.problems(
            programs, lambda name, wanted: _drawn(task, name, wanted, seed), tuple(checked), "full", with_tables)
            if p not in identity.unproven]
        # The matmul work done, as a share of the reference's (a backstop: a sixteenth): a constant
        # amount where the reference's grows leaves work out at the full size.
        identity.unproven += _work_problems(programs, task, tuple(checked))
        # Data the layout outside the kernels keeps whole where checked and cuts at the full size,
        # whatever work the kernels do (work shares can be padded with work that costs nothing).
        needs = _reference_needs(task, seed)
        identity.unproven += _layout_problems(programs, tuple(checked), identity.facts, sizes, needs)
        if with_tables:  # what each output block reads where index maps read the tables
            identity.unproven += [p for p in _layout_problems(programs, tuple(checked), with_tables, sizes, needs)
                                  if p not in identity.unproven]
    if identity.structural:
        raise Outcome("rejected", "compile", f"the full-size program is not the checked one: {identity.structural}; "
                                             f"the program that is compiled and timed must be the one whose answers "
                                             f"are checked, up to its sizes")
    if identity.unproven:
        facts["identity_unproven"] = identity.unproven


def _work_problems(programs: dict, task, checked: tuple) -> list[str]:
    """work_ratio's findings, with the reference traced at the same size sets (fail closed)."""
    import jax
    try:
        reference = exact_reference(task.reference())
        references = {name: jax.make_jaxpr(reference)(*[jax.ShapeDtypeStruct(tuple(s.shape), jax.numpy.dtype(s.dtype))
                                                         for s in task.size_sets[name].inputs])
                      for name in (*checked, "full")}
        return work_ratio.problems(programs, references, checked, "full")
    except Exception as error:
        return [f"the candidate's work could not be compared with the reference's "
                f"({type(error).__name__}: {str(error)[:160]})"]


def _reference_needs(task, seed: int):
    """layout_cuts' `needs`: the reference's gradient at a checked size set, on the inputs drawn
    there (reference_needs.py). The reference is loaded and the inputs drawn only when a finding
    asks (most evaluations make none), and a failure there leaves the finding standing."""
    loaded = {}

    def needs(size_set, i, d, output, starts, sizes, a, b) -> bool:
        if "reference" not in loaded:
            loaded["reference"] = task.reference()
        if size_set not in loaded:
            loaded[size_set] = _drawn(task, size_set, list(range(len(task.size_sets[size_set].inputs))), seed)
        return reference_needs.needs_all(loaded["reference"], loaded[size_set], i, d, output, starts, sizes, a, b)
    return needs


def _layout_problems(programs: dict, checked: tuple, facts: dict, sizes: dict, needs=None) -> list[str]:
    """layout_cuts' findings (fail closed); `facts`: decision_coverage's, for the kernels' reads;
    `needs`: the reference's, for prefix_reads' findings."""
    try:
        return layout_cuts.problems(programs, (*checked, "full"), facts, sizes, needs)
    except Exception as error:
        return [f"the layout outside the kernels could not be followed ({type(error).__name__}: {str(error)[:160]})"]


def _runner(program, target):
    """The jitted program for the correctness runs: Mosaic on a TPU host, else Pallas TPU
    interpret mode, with race, out-of-bounds and uninitialized-memory (NaN) detection."""
    import jax
    from jax._src import core
    from jax.experimental.pallas import tpu as pltpu
    if target.on_tpu:
        mode = False
    else:
        mode = pltpu.InterpretParams(detect_races=True, out_of_bounds_reads="raise", uninitialized_memory="nan")
        program = tpu_numerics.as_on_tpu(program)  # the chip's rounding of its contractions
    # XLA's default optimization level: at level 0 the CPU backend computes exp, tanh and rsqrt by
    # other routines (other bits in 36 of the 124 starter programs), and the tasks' tolerances
    # were measured at the default; level 0 compiled 27% sooner (docs/benchmarks.md).
    return jax.jit(core.jaxpr_as_fun(jaxpr_check.set_interpret(program, mode)))


def _run_candidate(fn, inputs, target, pallas_lines) -> list[np.ndarray]:
    import jax
    try:
        out = fn(*inputs)
        jax.block_until_ready(out)
        if not target.on_tpu:
            from jax._src.pallas.mosaic.interpret import interpret_pallas_call as interp
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
                      diagnostics.from_exception(error, "candidate.py", "run", pallas_lines))


def _full_size_check(task, kernel, reference, target, seed: int) -> str:
    """On a TPU host: the timed program's answers at the full sizes against the reference's, by
    the runner's rule (|a - e| <= atol + rtol |e|). Empty when they agree."""
    import jax
    full = task.size_sets["full"]
    inputs = [jax.device_put(x, target.device) for x in task.draw_inputs("full", seed)]
    expected = [_wire(np.asarray(o)) for o in _as_tuple(jax.jit(reference)(*inputs))]
    actual = [_wire(np.asarray(o)) for o in _as_tuple(jax.jit(kernel)(*inputs))]
    if len(actual) != len(expected):
        return f"at the full sizes the kernel returned {len(actual)} outputs; the task has {len(expected)}"
    for spec, e, a in zip(full.outputs, expected, actual):
        if a.shape != e.shape:
            return f"at the full sizes output '{spec.name}' has shape {list(a.shape)}; the task's is {list(e.shape)}"
        e64, a64 = e.astype(np.float64), a.astype(np.float64)
        bad = int(np.sum(~(np.abs(a64 - e64) <= spec.atol + spec.rtol * np.abs(e64))))
        if bad:
            return f"at the full sizes output '{spec.name}': {bad} of {e.size} elements outside tolerance"
    return ""


def _within_tolerance(specs, expected, actual) -> bool:
    """The runner's rule (|a - e| <= atol + rtol |e|, shapes equal) on one trial's outputs. Only
    whether the judge goes on to the full-size sample rests on it; the verdict is the runner's."""
    for spec, e, a in zip(specs, expected, actual):
        if e.shape != a.shape:
            return False
        e64, a64 = e.astype(np.float64), a.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = np.abs(a64 - e64) <= spec.atol + spec.rtol * np.abs(e64)
        # Where either is not finite, the runner's rule (correctness.cc): both NaN, or equal
        # (the same infinity). Else an output the runner passes skipped the sample unnoted.
        special = ~(np.isfinite(e64) & np.isfinite(a64))
        close = np.where(special, (np.isnan(e64) & np.isnan(a64)) | (e64 == a64), close)
        if not np.all(close):
            return False
    return True


def _full_size_sample(task, program, seed: int, estimate) -> list[str]:
    """The full-size program run on the grid steps of a few output blocks (the last and
    SAMPLED_BLOCKS drawn from the server's seed), against the task's starter on the same elements.
    A disagreement or a crash is a wrong answer at the full size. A program of a form the sample
    cannot run, where the starter's can be run, is a design nobody checked at the full size: its
    estimate is not trusted (what turned the sample off was the candidate's choice: an identity
    XLA op on an input, a fifth kernel, an output written by its own copies, state carried from
    steps not run, ...). Where the starter's cannot be, no candidate of the task can be; where the
    candidate's sample would pass the sample's memory bounds (blocks, inputs passed whole: a size
    an honest design reaches, such as a KV cache copied by the kernel), the proof alone decides.
    The starter's own program is not run against itself. Returns the verdict's detail."""
    import jax
    import jax.numpy as jnp
    from . import full_size_sample
    if task.starter_path is None:
        return ["full-size sample: not run (the task has no starter to compare with)"]
    args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
    try:
        oracle = jax.make_jaxpr(task_spec.load_function(task.starter_path, "kernel", "kernelgym_sample_oracle"))(*args)
    except Exception as error:  # the starter's side failing where it was not foreseen: the task's, not the candidate's
        return [f"full-size sample: not run (tracing the starter failed: {type(error).__name__}: {str(error)[:200]})"]
    if _same_program(program, _as_the_judge_reads(oracle)):
        return ["full-size sample: not needed (the program is the starter's own, the same written canonically: "
                "it would be compared with itself)"]
    # check_program turns a failure on the candidate's side into a verdict; what escapes it is
    # the starter's side failing where it was not foreseen: the task's, not the candidate's.
    try:
        verdict = full_size_sample.check_program(program, oracle, task, seed, SAMPLED_BLOCKS)
    except Exception as error:
        return [f"full-size sample: not run (it failed on the starter: {type(error).__name__}: {str(error)[:200]})"]
    if verdict.status in ("disagree", "crashed"):
        raise Outcome("incorrect", "correctness", "the full-size program, run in TPU interpret mode on the grid steps "
                      f"of a sample of its output blocks: {verdict.reason}")
    if verdict.status == "not_sampled" and verdict.side == "candidate" and verdict.costly:
        return [f"full-size sample: not run on this program, past the sample's bounds ({verdict.reason})"]
    if verdict.status == "not_sampled" and verdict.side == "candidate":
        estimate.trusted = False
        estimate.reasons.append("the full-size program could not be run on a sample of its grid, while the task's "
                                f"starter can be: {verdict.reason}")
        return [f"full-size sample: not run on this program ({verdict.reason})"]
    if verdict.status == "not_sampled":
        return [f"full-size sample: not run for this task ({verdict.reason})"]
    return [f"full-size sample: {len(verdict.blocks)} output blocks agree with the starter's "
            f"({verdict.steps} grid steps run in TPU interpret mode at the full sizes)"]


def _as_the_judge_reads(program):
    """A program traced here, as the judge reads the tracer's: through the artifact, which stands
    in for what cannot travel (the functions a custom_jvp or custom_vjp holds). Compared by
    content with a candidate's, the starter read any other way is never its own program."""
    from . import artifact
    try:
        return artifact.load(artifact.dump({"full": program}, "starter.py"))["full"]
    except Exception:  # a starter that cannot travel: compared as traced (at worst it is sampled)
        return program


def _same_program(a, b) -> bool:
    """Whether two traced programs are one: the same canonical bytes (program_key.py: every
    primitive, parameter, literal, constant, aval and inner program; source locations left out),
    so the same inputs give the same outputs in interpret mode."""
    from . import program_key
    try:
        return program_key.digest(a, {}) == program_key.digest(b, {})
    except Exception:  # Uncacheable, or anything else a program makes of the writer: run the sample
        return False


def _estimates(task, target, full_specs, dump_dir=None) -> protocol.ReferenceEstimate:
    """The reference's estimated device time on the target (tpu_estimate.py: XLA's model of its
    ops, Mosaic kernels by their schedules), labelled an estimate, never a measurement. The runner
    caches it by the content of the task's files and of the judge (reference_estimate_cache.h), and
    judges the candidate's estimate against it."""
    out = protocol.ReferenceEstimate(estimated_us=0.0, xla_model_us=0.0, trusted=False, flops=0.0,
                                     bytes_accessed=0.0, error="")
    try:
        if dump_dir is None:
            compiled = tpu_target.compile_for(target, exact_reference(task.reference()), full_specs)
            seconds = compiled.cost.get("optimal_seconds", 0.0)
            if seconds > 0:
                out.estimated_us = float(seconds * 1e6)
        else:
            tpu_estimate.clear_dump(dump_dir)
            compiled = tpu_target.compile_for(target, tpu_estimate.fresh(exact_reference(task.reference())), full_specs)
            est = tpu_estimate.estimate(exact_reference(task.reference()), full_specs, target, dump_dir, compiled=compiled,
                                        trusted_code=True)
            if est.seconds > 0:
                out.estimated_us = float(est.seconds * 1e6)
            out.xla_model_us = float(est.xla_model_seconds * 1e6)
            out.trusted = bool(est.trusted)
        out.flops = float(compiled.cost.get("flops", 0.0))
        out.bytes_accessed = float(compiled.cost.get("bytes accessed", 0.0))
    except Exception as error:  # an estimate is optional; its absence is reported, not fatal
        out.trusted = False
        out.error = f"{type(error).__name__}: {str(error)[:200]}"
    return out


def _kernel_profile(k) -> protocol.KernelProfile:
    return protocol.KernelProfile(kernel=str(k.kernel), grid_steps=float(k.grid_steps or 0),
                                  bundles_per_step=float(k.bundles_per_step or 0),
                                  estimated_cycles=float(k.estimated_cycles or 0),
                                  critical_path_cycles=float(k.critical_path_cycles or 0),
                                  unit_share={str(u): float(v) for u, v in (k.unit_share or {}).items()
                                              if isinstance(v, numbers.Real)})


def _candidate_estimate(compiled, program, target, dump_dir) -> protocol.CandidateEstimate:
    """The estimator's figures for the program that was checked and compiled (the compile just
    done dumped its final schedules). Whether a speedup built on them is trusted, beside the
    reference's figures, is the runner's verdict (tpu_runner/pallas/pallas_verdict.cc), not ours."""
    try:
        if dump_dir is None:
            raise RuntimeError("the judge has no static profile folder")
        est = tpu_estimate.estimate(target=target, dump_dir=dump_dir, compiled=compiled, closed_jaxpr=program)
    except Exception as error:  # no estimate: said, and nothing paid for speed
        return protocol.CandidateEstimate(estimated_us=0.0, mosaic_cycles=0.0, xla_us=0.0, trusted=False,
                                          reasons=[f"no estimate: {type(error).__name__}: {str(error)[:200]}"],
                                          method="", kernels=[])
    return protocol.CandidateEstimate(estimated_us=float(est.seconds * 1e6), mosaic_cycles=float(est.mosaic_cycles),
                                      xla_us=float(est.xla_seconds * 1e6), trusted=bool(est.trusted),
                                      reasons=[str(r) for r in est.reasons], method=str(est.method),
                                      kernels=[_kernel_profile(k) for k in est.kernels])
