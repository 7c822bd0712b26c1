"""The protocol between the C++ runner and its two Python processes, the judge and the tracer:
every message defined once, here, with its fields and their types. The runner's mirror is
tpu_runner/pallas/judge_protocol.h; docs/pallas.md shows the exchange.

On the wire a message is one JSON object per line: {"v": VERSION, "kind": KIND, <its fields>}.
JSON lives only at this edge (`encode`, `decode`); everything else works on the dataclasses. A
message of another version, of an unknown kind, with a field missing, a field of another type or a
field this version does not define is refused with a ProtocolError that names it: neither side
guesses at what the other meant.

  judge/tracer -> runner  Ready                  the process is up (jax imported, the target open)
  runner -> judge         JudgeJob               one evaluation
  judge -> runner         Specs                  the inputs' shapes per size set, for the tracer
                       or Result                 the static check refused the source
  runner -> tracer        TraceJob               trace the candidate at those shapes
  tracer -> runner        Traced | Result        the traced programs written, or why not
  judge -> runner         Reference              expected outputs written (the judge's folder only)
  runner -> judge         Artifact               the tracer's program, copied there by the runner
  judge -> runner         CompileKey             the full-size program's canonical key (program_key.py)
  runner -> judge         CompileFacts           an earlier compile's facts for that key, or none
  judge -> runner         CompileFacts           the facts of the compile it did (before any run)
  judge -> runner         Progress..., Result    compile, trials; then the judge's facts
  either -> runner        Fatal                  the process could not start

A fork server (forkserver.py) speaks the same protocol on its own socket with the runner:

  runner -> fork server   ForkJob                the next job; its descriptors ride along (SCM_RIGHTS)
  fork server -> runner   JobEnded               the job's process ended (how), /tmp emptied or not
                       or Fatal                  the server cannot start (then it exits)
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import ClassVar, Optional

VERSION = 1


class ProtocolError(ValueError):
    """A message that is not one of this protocol's, said in words."""


@dataclasses.dataclass
class InputSpec:
    shape: list[int]
    dtype: str


@dataclasses.dataclass
class Diagnostic:
    file: str
    line: int
    column: int
    severity: str  # error, warning, note
    message: str


@dataclasses.dataclass
class Ready:
    KIND: ClassVar[str] = "ready"
    role: str                      # "judge" or "tracer"
    jax: str
    start_seconds: float
    target: str                    # judge: the TPU generation it compiles for; tracer: ""
    on_tpu: bool
    device_kind: str
    fork_server_job: int           # 0: a process started for this evaluation
    fork_server_start_seconds: float


@dataclasses.dataclass
class JudgeJob:
    KIND: ClassVar[str] = "job"
    task_dir: str
    layout: str                    # "kernelgym" or "jaxbench"
    suite: str
    out_dir: str
    candidate_path: str
    seeds: list[int]
    static_check: bool
    run_timing: bool
    timing_seed: int
    estimate_reference: bool       # compile the reference at full size for its estimated time
    estimate_candidate: bool       # estimate the candidate's compiled program


@dataclasses.dataclass
class TraceJob:
    KIND: ClassVar[str] = "trace_job"
    candidate_path: str
    size_sets: dict[str, list[InputSpec]]
    artifact_path: str


@dataclasses.dataclass
class Specs:
    KIND: ClassVar[str] = "specs"
    size_sets: dict[str, list[InputSpec]]


@dataclasses.dataclass
class ExpectedOutput:
    name: str
    dtype: str
    shape: list[int]
    file: str                      # in the judge's job folder
    atol: float
    rtol: float


@dataclasses.dataclass
class ReferenceTrial:
    seed: int
    size_set: str
    inputs_sha256: list[str]
    outputs: list[ExpectedOutput]


@dataclasses.dataclass
class ReferenceEstimate:
    """The reference's estimated device time on the target (tpu_estimate.py), never a measurement."""
    estimated_us: float            # 0: none
    xla_model_us: float
    trusted: bool                  # the estimator's view of this figure
    flops: float
    bytes_accessed: float
    error: str                     # why there is no estimate ("" when there is one)


@dataclasses.dataclass
class Reference:
    KIND: ClassVar[str] = "reference"
    trials: list[ReferenceTrial]
    estimate: Optional[ReferenceEstimate]  # None: the job did not ask for one


@dataclasses.dataclass
class Artifact:
    KIND: ClassVar[str] = "artifact"
    file: str                      # in the judge's job folder


@dataclasses.dataclass
class Traced:
    KIND: ClassVar[str] = "traced"
    file: str
    bytes: int
    stage_seconds: dict[str, float]


@dataclasses.dataclass
class Progress:
    KIND: ClassVar[str] = "progress"
    stage: str                     # "compiled", "trial" or "full_size_sample"
    trial: int                     # -1 for "compiled" and "full_size_sample"
    repeat: int


@dataclasses.dataclass
class OutputFile:
    dtype: str
    shape: list[int]
    file: str


@dataclasses.dataclass
class CandidateRun:
    trial: int
    repeat: int
    outputs: list[OutputFile]
    inputs_sha256: list[str]


@dataclasses.dataclass
class TimingSample:
    reference_ns: float
    candidate_ns: float


@dataclasses.dataclass
class Timing:
    representative: bool
    clock: str                     # "tpu_device" or "none"
    reason: str
    samples: list[TimingSample]
    seconds: float
    profile: dict[str, float]


@dataclasses.dataclass
class TpuCompile:
    target: str
    device_kind: str
    deviceless: bool
    seconds: float
    memory: dict[str, float]       # bytes, from the compiled executable (and the judge's VMEM estimate)


@dataclasses.dataclass
class KernelProfile:
    kernel: str
    grid_steps: float
    bundles_per_step: float
    estimated_cycles: float
    critical_path_cycles: float    # 0: not reported
    unit_share: dict[str, float]


@dataclasses.dataclass
class CandidateEstimate:
    """The estimator's figures for the candidate's compiled program. Whether a speed built on them is
    trusted (and so paid) is the runner's verdict, made beside the reference's figures."""
    estimated_us: float            # 0: none
    mosaic_cycles: float
    xla_us: float
    trusted: bool                  # the estimator's own view of this figure
    reasons: list[str]             # why it is not (or, with estimated_us 0, why there is none)
    method: str
    kernels: list[KernelProfile]


@dataclasses.dataclass
class CompileKey:
    """judge -> runner, before the full-size compile: the program's canonical key (program_key.py).
    The runner answers with CompileFacts: an earlier compile's of the same content, or none."""
    KIND: ClassVar[str] = "compile_key"
    program: str                   # SHA-256 (hex) of the program written canonically, with the judge's context


@dataclasses.dataclass
class CompileFacts:
    """runner -> judge: the facts of an earlier compile of the same content (both None: compile
    here). judge -> runner, after a compile it did for a key it sent: the facts to keep, sent
    before any of the candidate's program runs."""
    KIND: ClassVar[str] = "compile_facts"
    tpu_compile: Optional[TpuCompile]
    estimate: Optional[CandidateEstimate]  # as the estimator gave it, before the judge's own caveats


@dataclasses.dataclass
class Result:
    KIND: ClassVar[str] = "result"
    status: str                    # ok, rejected, compile_error, incorrect, crashed, internal_error
    stage: str
    message: str
    diagnostics: list[Diagnostic]
    details: list[str]
    stage_seconds: dict[str, float]
    trials: list[CandidateRun]     # the candidate's outputs, for the runner to compare
    timing: Optional[Timing]
    tpu_compile: Optional[TpuCompile]
    estimate: Optional[CandidateEstimate]
    pallas_calls: int


@dataclasses.dataclass
class Fatal:
    KIND: ClassVar[str] = "fatal"
    message: str


@dataclasses.dataclass
class ForkJob:
    """runner -> fork server: fork the next job's process. The message travels in one sendmsg with
    the job's descriptors attached (its control socket, report pipe and stderr pipe, in that order)."""
    KIND: ClassVar[str] = "fork_job"
    descriptors: int               # how many are attached: 3


@dataclasses.dataclass
class JobEnded:
    """fork server -> runner: the job's process ended and the server emptied /tmp. clean false:
    something stayed there, and the server exits rather than fork again."""
    KIND: ClassVar[str] = "job_ended"
    job: int                       # the server's count of jobs, from 1
    exit_code: int                 # -1 when a signal ended it
    signal: int                    # 0 when it exited
    clean: bool


MESSAGES = {cls.KIND: cls for cls in (Ready, JudgeJob, TraceJob, Specs, Reference, Artifact, Traced, Progress,
                                      CompileKey, CompileFacts, Result, Fatal, ForkJob, JobEnded)}


def failure(status: str, stage: str, message: str, diagnostics=None, details=None,
            stage_seconds=None) -> Result:
    """A Result that ends an evaluation before it has outputs."""
    return Result(status=status, stage=stage, message=message, diagnostics=list(diagnostics or []),
                  details=list(details or []), stage_seconds=dict(stage_seconds or {}), trials=[], timing=None,
                  tpu_compile=None, estimate=None, pallas_calls=0)


def diagnostics_of(entries) -> list[Diagnostic]:
    """diagnostics.py's maps as the protocol's records."""
    return [Diagnostic(file=str(d.get("file", "candidate.py")), line=int(d.get("line", 0)),
                       column=int(d.get("column", 0)), severity=str(d.get("severity", "error")),
                       message=str(d.get("message", ""))) for d in entries]


# --- the edge: dataclasses <-> JSON ---------------------------------------------------------------

def _to_plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return 0.0  # JSON has no NaN or infinity; 0 reads as "no figure" (never as a paid one)
    if dataclasses.is_dataclass(value):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [_to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    return value


def encode(message) -> str:
    """One line of JSON (no newline). The message is checked first: a sender's bug is found at
    the sender, not read as garbage by the other side."""
    if type(message) not in MESSAGES.values():
        raise ProtocolError(f"{type(message).__name__} is not a message of this protocol")
    plain = _to_plain(message)
    _read_fields(type(message), plain, message.KIND)  # the same rules the reader applies
    return json.dumps({"v": VERSION, "kind": message.KIND, **plain}, allow_nan=False)


def decode(line: str):
    """A message from one line of JSON, or ProtocolError."""
    try:
        data = json.loads(line)
    except ValueError as error:
        raise ProtocolError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ProtocolError("a message must be a JSON object")
    data = dict(data)
    version, kind = data.pop("v", None), data.pop("kind", None)
    if version != VERSION:
        raise ProtocolError(f"protocol version {version!r}; this judge speaks version {VERSION}")
    if kind not in MESSAGES:
        raise ProtocolError(f"unknown message kind {kind!r}; known: {sorted(MESSAGES)}")
    return _read_fields(MESSAGES[kind], data, kind)


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _read_fields(cls, data, where: str):
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: must be an object")
    hints = _hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ProtocolError(f"{where}: unknown field(s) {unknown} (version {VERSION} defines {fields})")
    missing = [name for name in fields if name not in data]
    if missing:
        raise ProtocolError(f"{where}: missing field(s) {missing}")
    return cls(**{name: _read(hints[name], data[name], f"{where}.{name}") for name in fields})


def _read(kind, value, where: str):
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _read(inner, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: must be a list, not {type(value).__name__}")
        return [_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: must be an object, not {type(value).__name__}")
        return {str(k): _read(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(kind):
        return _read_fields(kind, value, where)
    if kind is bool:
        if not isinstance(value, bool):
            raise ProtocolError(f"{where}: must be a boolean, not {type(value).__name__}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"{where}: must be an integer, not {type(value).__name__}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{where}: must be a number, not {type(value).__name__}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ProtocolError(f"{where}: must be a string, not {type(value).__name__}")
        return value
    raise ProtocolError(f"{where}: no rule for type {kind!r}")  # a bug of this module
