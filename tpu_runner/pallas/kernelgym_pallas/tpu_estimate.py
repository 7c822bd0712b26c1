"""An estimated TPU device time from the TPU compiler's own figures, without a TPU.

A TPU core is statically scheduled: libtpu knows, when it compiles, which VLIW bundles each
kernel issues. Two sources, chosen by `mode` (the libtpu flags differ, and are set once, before
jax is imported):

* "bundles" (the judge's; well under 0.5 s and ~50-500 KB a compile): `--xla_jf_dump_to` with the
  LLO text of the last pass only: per compiled op, its final schedule (`final_bundles`, read by
  llo_schedule.py: a bundle a line, `>` per enclosing loop or region; loops' trip counts from
  their start, bound and step; the DMAs with their sizes and sync flags) and the slots each
  bundle fills (`final_hlo-static-per-bundle-utilization`: MXU, XLU, VALU, VPOP, EUP, VLOAD,
  VSTORE, SALU). A Mosaic kernel's schedule holds its grid loop and its own loops, both sides of
  every branch included (so work under a pl.when is paid at every step).
      kernel cycles  = sum over bundles of the trip counts of their loops
                       + stalls of the kernel's own DMA waits (llo_schedule.manual_dma_stall_cycles)
                       + grid steps x STEP_OVERHEAD_CYCLES[target]
      compute        = max(cycles / CLOCK_HZ, float matmul FLOPs / the chip's bf16 peak)
      kernel time    = the grid pipeline over `compute` (pipeline_model.py: the first fetch and the
                       last write-back alone, the other copies overlapped with the steps),
                       at least all bytes moved / HBM_BYTES_PER_S
      a kernel no pallas_call traced (XLA's own, in a reference): cycles / CLOCK_HZ + the bytes
                       its schedule copies / HBM_BYTES_PER_S (UNPAIRED_COPIES_SERIAL)
* "profile": `--xla_jf_dump_static_llo_profile_to` writes `hlo_op_estimate { hlo_op_name,
  estimated_cycles }` per op: libtpu's evaluator runs the unrolled program with a DMA latency
  model. Closer to a run, but it costs the compile 6-15 us per estimated cycle (measured here:
  +4 s for a 256-step elementwise kernel, +30 s for one of 16,384 steps): too slow for the
  judge's 1 s budget, kept for calibration. It counts one path of a branch (heavy work under a
  data-dependent pl.when added nothing), hence the branch rules below in this mode only.

Both add the XLA ops around the kernels, priced by XLA's cost model (`cost_analysis()
["optimal_seconds"]`, which sees nothing inside a Mosaic kernel and, on TPU, is erratic around an
XLA while loop; its -1 s for each op it cannot price is taken back out, xla_model_seconds, and so is
the time of the bytes it charges beyond what the ops can move, model_within_bound: a gather charged
~64 KiB per gathered element), floored by the ops' own static cycles at CLOCK_HZ (the chip's clock): in "bundles" mode their final
schedules (each bundle times its loops' trip counts, as for a kernel; an op in the body of an XLA
while loop with a static trip count, hlo_loops.py, times that count), in "profile" mode their
static profile. Each is a lower bound that misses something: XLA's model prices a convolution or
a transcendental as if the MXU and VPU were always full (2-3x optimistic on JAXBench's
convolutions); a schedule knows nothing of HBM bandwidth (a memory-bound RMSNorm: 0.35x), and
counts an op in a loop without a static trip count once (each op sharing a compiled program with
another is counted, same_code_ops). The larger is taken. The reference is valued the same way. Against the measured v6e times of 46
JAXBench baselines (bench/tpu_estimate_calibration.py, docs/benchmarks.md) the estimate's rank
correlation went from 0.89 to 0.97 with the schedule floor, and the share within 1.5x after one
scale from 80% to 83%.

Usage (the flags must be in the environment before jax/libtpu is imported):

    dump_dir = apply_environment(scratch)                # log bounds + LIBTPU_INIT_ARGS
    import jax
    est = estimate(fn, specs, target, dump_dir)          # compiles; or compiled=... to reuse one
    est.seconds, est.trusted, est.reasons, est.kernels

What the static figures cannot see makes the estimate untrusted (`trusted=False`, with reasons),
and the reward then pays nothing for speed:
  * a loop inside a kernel with a trip count known only at run time (`while`): counted once;
  * a grid whose size is known only at run time;
  * a Mosaic kernel inside an XLA loop or branch (counted once); in trusted code (a task's
    reference: `trusted_code=True`), one in a loop with a static trip count is priced per trip;
  * an XLA `while`/`cond` in the program (XLA's model cannot know the trip count or branch);
  * no figures for a kernel, kernels that cannot be matched to the traced pallas_calls, no XLA
    figure where XLA ops exist;
  * "profile" mode only: a `cond`/`pl.when` on data read in the kernel, or grid-index branches
    holding much of the work (the profile counts the cheap path).

Constants, each measured here (jax 0.10.2, libtpu 0.0.42.1, deviceless compiles):
  * CLOCK_HZ is the chip's clock, from its published peak: v5e 197e12 FLOP/s / (4 MXUs x 128 x
    128 x 2) = 1.50 GHz (Cloud TPU v5e page); v6e 918e12 / 524,288 FLOP a cycle = 1.75 GHz. A
    schedule's cycles are chip cycles: XLA's own 2048^3 bf16 dot is 138,056 cycles on v5e, 92 us
    at 1.5 GHz, 94% of the MXU's peak. Until issue 32 they were converted at an "XLA-equivalent"
    clock (XLA_EQUIVALENT_CLOCK_HZ: the same dot's XLA model, 132.70 us -> 1.040e9/s; v6e 48,842
    cycles, 39.20 us -> 1.246e9), which made every kernel 1.44x (v5e) / 1.40x (v6e) slower than
    its schedule: against published v5e measurements of Pallas matmuls (bench/
    tpu_estimate_published.py) kernels measured at 0.93-0.99 of XLA were paid 0.64-0.85, and
    JAXBench's 1p/2p (3.5x, 3.3x measured) 1.35x and 1.32x. At the chip's clock the per-step
    overhead below is 0.35 us on v5e (0.15 us on v6e).
  * HBM_BYTES_PER_S: XLA's model for `a + 1` on a 4096x4096 float32 array (134,217,728 bytes):
    v5e 181.95 us -> 737.7e9 B/s; v6e 81.94 us -> 1638e9 B/s (the v6e page says 1638 GBps).
  * STEP_OVERHEAD_CYCLES: what libtpu's static profile (its DMA latency model) adds per grid
    step to the executed bundles, fitted on four kernels per target: silu_mul (2^24 floats) in
    8x128 and 256x128 blocks, a 2048^3 bf16 matmul in 128^3 and 256^3 blocks. v6e: 261, 306,
    264, 240 cycles a step -> 265; v5e: 537, 589, 557, 446 -> 530.

Against the static profile ("bundles" mode, v6e, 2048^3 bf16 matmul): 128^3 blocks 1,839,500
cycles (profile 1,949,049), 256^3 297,104 (297,815), 512^3 85,562 (71,680), 1024x1024x512 63,236
(48,288). The larger blocks are overestimated because a pl.when epilogue (the accumulator's
write-back on the last k step) is paid at every step: a bias against the candidate, never for it.
"""
from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import re
import shutil

from . import hlo_bytes, hlo_loops, llo_schedule, pipeline_model, xla_ints

# Schedules count chip cycles: they are converted at the chip's clock (the notes say why it is no
# longer XLA_EQUIVALENT_CLOCK_HZ).
NOMINAL_CLOCK_HZ = {"v5e": 1.50e9, "v6e": 1.75e9}
CLOCK_HZ = dict(NOMINAL_CLOCK_HZ)
XLA_EQUIVALENT_CLOCK_HZ = {"v5e": 1.040e9, "v6e": 1.246e9}
HBM_BYTES_PER_S = {"v5e": 737.7e9, "v6e": 1638e9}
STEP_OVERHEAD_CYCLES = {"v5e": 530, "v6e": 265}
# A DMA the kernel starts and waits for itself: done this many cycles (at CLOCK_HZ) after its start,
# plus its bytes at HBM_BYTES_PER_S. libtpu's own DMA latency model (its static profile) of a kernel
# that copies 4 KiB, waits, and repeats (tests/adversarial_pallas/estimate_serial_small_dmas at
# 2^16 and 2^17 floats, and at 8, 64 and 256 rows a copy): v6e 1,649 cycles a chunk of three
# serial copies, 53 of them bundles -> 530 a copy; v5e 2,801 -> 910.
DMA_LATENCY_CYCLES = {"v5e": 910, "v6e": 530}

# A Mosaic kernel that no pallas_call traced (XLA's own, in a task's reference: the online softmax
# XLA emits for an attention) is priced as its schedule's cycles plus its copies' bytes at the HBM
# bandwidth, not the larger of the two: without a grid and blocks the pipeline model cannot say how
# much of its copying hides under its steps. Chosen on a training split of JAXBench's v6e baselines
# (bench/tpu_estimate_calibration.py --split, docs/benchmarks.md) against the larger-of-the-two
# form, and reported on the held-out half; it makes a reference dearer (the online softmax's
# attention baselines were estimated at 0.44-0.63 of measured), never a candidate (a candidate's
# unpaired kernel is untrusted).
UNPAIRED_COPIES_SERIAL = True

MODES = ("bundles", "profile")
DEFAULT_MODE = "bundles"

# "profile" mode: work under grid-index conditions, weighted by the share of grid steps that run
# it, beyond this fraction of the unconditional work makes the estimate untrusted.
CONDITIONAL_WORK_LIMIT = 0.25
# Grid points evaluated to find the share of steps a grid-index condition is true on: all of them
# up to this many, else this many drawn uniformly (seeded) with the first and the last, so that a
# full-size grid is evaluated too (a causal attention's is 262,144 steps; left unevaluated, its
# `pl.when` was floored by its least branch, nothing: red team, round 10).
GRID_POINTS_LIMIT = 1 << 17

METHODS = {
    "bundles": ("Mosaic kernels: final-schedule bundles x their loops' trip counts + a step overhead (265 cycles v6e, "
                "530 v5e) a grid step, / XLA-equivalent "
                "clock, floored by the blocks' bytes / HBM bandwidth; XLA ops: max(XLA optimal_seconds, their "
                "final-schedule cycles / clock)"),
    "profile": ("Mosaic kernels: static LLO profile cycles / XLA-equivalent clock, floored by operand and result "
                "bytes / HBM bandwidth; XLA ops: max(XLA optimal_seconds, static LLO cycles / clock)"),
}
METHOD = METHODS[DEFAULT_MODE]

_PROFILE_SUFFIX = "_static_llo_profile.textproto"
_UTILIZATION_PASS = "final_hlo-static-per-bundle-utilization"


def libtpu_dump_args(dump_dir, mode: str = DEFAULT_MODE) -> str:
    """LIBTPU_INIT_ARGS for the mode's dump, and nothing more (all LLO passes would be ~130 MB)."""
    if mode == "profile":
        return f"--xla_jf_dump_static_llo_profile_to={dump_dir}"
    return (f"--xla_jf_dump_to={dump_dir} --xla_jf_dump_llo_text=true --xla_jf_dump_hlo_text=false "
            f"--xla_jf_dump_llo_pass_label_regex=final_bundles|{_UTILIZATION_PASS}")


def bounded_log_environment(scratch) -> dict[str, str]:
    """TPU_* variables that keep libtpu's logs off the disk: errors only, to stderr (which the
    runner bounds), and the log folder in `scratch` rather than tpu_logs in the temp folder
    (a deviceless compile has written 74 GB there)."""
    logs = pathlib.Path(scratch) / "tpu_logs"
    logs.mkdir(parents=True, exist_ok=True)
    return {"TPU_STDERR_LOG_LEVEL": "3", "TPU_MIN_LOG_LEVEL": "3", "TF_CPP_MIN_LOG_LEVEL": "3",
            "TPU_LOG_DIR": str(logs)}


def apply_environment(scratch, mode: str = DEFAULT_MODE) -> pathlib.Path:
    """Sets the log bounds and the mode's dump flags in os.environ (before jax is imported);
    returns the dump folder."""
    scratch = pathlib.Path(scratch)
    dump_dir = scratch / ("llo_" + mode)
    dump_dir.mkdir(parents=True, exist_ok=True)
    for key, value in bounded_log_environment(scratch).items():
        os.environ.setdefault(key, value)
    args = os.environ.get("LIBTPU_INIT_ARGS", "")
    os.environ["LIBTPU_INIT_ARGS"] = (args + " " + libtpu_dump_args(dump_dir, mode)).strip()
    return dump_dir


def dump_enabled(dump_dir, mode: str = DEFAULT_MODE) -> bool:
    return dump_dir is not None and libtpu_dump_args(dump_dir, mode) in os.environ.get("LIBTPU_INIT_ARGS", "")


# ---- the per-bundle utilization (mode "bundles") ----------------------------------------------

_UTILIZATION_FILE = re.compile(r"^\d+-(.+)-\d+-" + _UTILIZATION_PASS + r"\.txt$")
# The slot columns of the utilization file, grouped by unit.
UNIT_GROUPS = {"mxu": ("MXU",), "vpu": ("VALU", "EUP", "VPOP"), "xlu": ("XLU",),
               "load_store": ("VLOAD", "VLOAD:FILL", "VSTORE", "VSTORE:SPILL"), "scalar": ("SALU",)}


@dataclasses.dataclass
class Utilization:
    bundles: int
    unit_share: dict    # group -> share of bundles issuing work in that group


def parse_utilization(text: str) -> Utilization:
    """One `final_hlo-static-per-bundle-utilization` file: a CAPACITY header naming the slot
    columns, then one line per bundle with the slots it fills."""
    lines = text.splitlines()
    columns: list[str] = []
    rows: list[list[int]] = []
    section = ""
    for line in lines:
        if line.startswith("=="):
            section = line.strip("= :").upper()
            continue
        if section.startswith("CAPAC") and not columns and "," in line:
            columns = [c.strip() for c in line.split(",")]
        elif section.startswith("UTILIZATION"):
            fields = line.split()
            if fields and all(f.isdigit() for f in fields):
                rows.append([int(f) for f in fields])
    share = {}
    if rows and columns:
        for group, names in UNIT_GROUPS.items():
            index = [columns.index(n) for n in names if n in columns]
            busy = sum(1 for r in rows if any(i < len(r) and r[i] for i in index))
            share[group] = busy / len(rows)
    return Utilization(len(rows), share)


def read_utilization(dump_dir) -> dict[str, Utilization]:
    """{hlo op name: Utilization} for the ops of the compile(s) dumped in the folder."""
    out: dict[str, Utilization] = {}
    for path in sorted(pathlib.Path(dump_dir).glob("*-" + _UTILIZATION_PASS + ".txt")):
        match = _UTILIZATION_FILE.match(path.name)
        if match:
            out[match.group(1)] = parse_utilization(path.read_text(errors="replace"))
    return out


_BUNDLES_FILE = re.compile(r"^\d+-(.+)-\d+-final_bundles\.txt$")
# The final schedule's reader (loops with their trip counts, the DMAs) lives in llo_schedule.py.
Schedule = llo_schedule.Schedule
parse_schedule = llo_schedule.parse_schedule


def read_schedules(dump_dir) -> dict[str, Schedule]:
    out: dict[str, Schedule] = {}
    for path in sorted(pathlib.Path(dump_dir).glob("*-final_bundles.txt")):
        match = _BUNDLES_FILE.match(path.name)
        if match and "schedule-analysis" not in path.name:
            out[match.group(1)] = parse_schedule(path.read_text(errors="replace"))
    return out


# libtpu keeps a dump file's name under 250 characters: an op name too long for that is cut, and a
# hash of it takes the tail's place (`<n>-<prefix>-<hash>-02-final_bundles.txt`; splash
# attention's Mosaic kernels have 232-character names). Such a file is keyed "<prefix>-<hash>".
_TRUNCATED_KEY = re.compile(r"^(.{100,}?)-(-?\d+)$")


def _key_for(table: dict, op_name: str, op_names) -> str | None:
    """The key of `table` (read_schedules / read_utilization) for the compiled op `op_name`: its
    own name, or the one truncated file whose prefix starts `op_name` and no other op of the
    program's (`op_names`). Anything ambiguous finds nothing: the kernel is then unpriced and the
    estimate untrusted, never priced from another kernel's schedule."""
    if op_name in table:
        return op_name
    found = []  # (key, prefix) of the truncated files whose prefix starts op_name
    for key in table:
        match = _TRUNCATED_KEY.match(key)
        if match and len(op_name) > len(match.group(1)) and op_name.startswith(match.group(1)):
            found.append((key, match.group(1)))
    if len(found) != 1 or sum(1 for other in op_names if other.startswith(found[0][1])) != 1:
        return None
    return found[0][0]


def for_op(table: dict, op_name: str, op_names) -> object | None:
    """The entry of `table` for the compiled op `op_name` (see _key_for), or None."""
    key = _key_for(table, op_name, op_names)
    return None if key is None else table[key]


def for_op_or_twin(table: dict, op_name: str, op_names, twins: dict) -> object | None:
    """for_op, or where there is none, the entry of one of `op_name`'s twins (same_code_ops: ops
    whose HLO text, Mosaic's serialized kernel included, is the same but for names and metadata).
    libtpu compiles such ops once and dumps the program under one of their names: two pallas_calls
    of one kernel on arrays of one shape (mla_attention's k and v up-projections) left the second
    without a schedule, unpriced and the estimate untrusted."""
    entry = for_op(table, op_name, op_names)
    for twin in twins.get(op_name, []):
        if entry is not None:
            break
        if twin != op_name:
            entry = for_op(table, twin, op_names)
    return entry


# ---- the profile files ------------------------------------------------------------------------

_ESTIMATE = re.compile(r'hlo_op_estimate\s*\{[^{}]*?hlo_op_name:\s*"([^"]*)"[^{}]*?estimated_cycles:\s*(\d+)', re.S)


def parse_profile(text: str) -> dict[str, int]:
    """{hlo_op_name: estimated_cycles} from one static LLO profile textproto."""
    out: dict[str, int] = {}
    for name, cycles in _ESTIMATE.findall(text):
        out[name] = out.get(name, 0) + int(cycles)
    return out


def read_profiles(dump_dir) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(pathlib.Path(dump_dir).glob("*" + _PROFILE_SUFFIX)):
        for name, cycles in parse_profile(path.read_text(errors="replace")).items():
            out[name] = out.get(name, 0) + cycles
    return out


def clear_dump(dump_dir) -> None:
    """Empties the folder: libtpu names the files after the op only, so one compile's files
    overwrite another's (the judge compiles one program at a time)."""
    path = pathlib.Path(dump_dir)
    if path.exists():
        for child in path.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    path.mkdir(parents=True, exist_ok=True)


# ---- the optimized HLO: which ops are Mosaic kernels, where they are, their bytes -------------

_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b(pred|s4|u4|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64|c64|c128|f8\w*)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")


def shape_bytes(shape: str) -> float:
    total = 0.0
    for dtype, dims in _ARRAY.findall(shape):
        count = 1
        for d in filter(None, dims.split(",")):
            count *= int(d)
        total += count * _DTYPE_BYTES.get(dtype, 1)
    return total


def _shape_of(rest: str) -> str:
    """The result shape at the start of an instruction's right-hand side."""
    return hlo_loops.split_shape(rest)[0]


@dataclasses.dataclass
class HloKernel:
    name: str           # the custom call's instruction name (the profile's hlo_op_name)
    computation: str    # the HLO computation it is in
    in_entry: bool
    bytes: float        # operands + results


_INDEX_COMMENT = re.compile(r"/\*[^*]*\*/")


def mosaic_kernels(hlo_text: str) -> tuple[list[HloKernel], list[str]]:
    """The Mosaic custom calls of an optimized HLO module, and the opcodes of control flow in it."""
    shapes: dict[str, str] = {}
    kernels: list[tuple[str, str, bool, str, str]] = []
    control: list[str] = []
    computation, in_entry = "", False
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            computation, in_entry = head.group(2), bool(head.group(1))
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, rest = match.groups()
        shape = _shape_of(rest)
        shapes[name] = shape
        after = rest[len(shape):].lstrip()
        opcode = after.split("(", 1)[0].strip()
        if opcode in ("while", "conditional"):
            control.append(opcode)
        if opcode == "custom-call" and 'custom_call_target="tpu_custom_call"' in rest:
            operands = after.split("(", 1)[1].split(")", 1)[0] if "(" in after else ""
            kernels.append((name, computation, in_entry, shape, operands))
    out = []
    for name, comp, entry, shape, operands in kernels:
        total = shape_bytes(shape)
        for operand in operands.split(","):
            # XLA marks every fifth operand of a long list: `/*index=5*/%bitcast.2`
            operand = _INDEX_COMMENT.sub("", operand).strip().lstrip("%")
            if operand in shapes:
                total += shape_bytes(shapes[operand])
            else:
                total += shape_bytes(operand)  # older text: the operand's type written inline
        out.append(HloKernel(name, comp, entry, total))
    return out, control


# ---- XLA's own model of the XLA ops: its total, read back where it counts ops it cannot price -----

_CUSTOM_CALL_TARGET = re.compile(r'custom_call_target="([^"]*)"')
# Custom calls XLA's TPU model prices (not at -1 s): Mosaic's, and `AllocateBuffer` (the buffer a
# lax.map's stacked result is written into; it emits no code). Measured here (jax 0.10.2, libtpu
# 0.0.42.1, deviceless v5e), mamba2_ssd's reference (two nested lax.maps): at B=2, S=512, H=16 two
# AllocateBuffer calls and none other, optimal_seconds +39.06 us; at its full sizes the same two and
# two `ConcatBitcast`, -1.99878 s: two calls at -1 s, not four. Counted as unpriced, the readings
# disagreed and the reference had no XLA figure: untrusted, nothing paid for speed.
PRICED_CUSTOM_CALLS = ("tpu_custom_call", "AllocateBuffer")
_FUSION_CALLS = re.compile(r"\bfusion\(.*?\bcalls=%?([\w.\-]+)")


def unpriced_custom_calls(hlo_text: str) -> list[str]:
    """The custom calls of an optimized HLO module that XLA's TPU cost model prices at -1 s each
    (its "no estimate"): every one outside a fusion's body except Mosaic's (`tpu_custom_call`, which
    the model prices at its declared pl.CostEstimate, or 0) and the others of PRICED_CUSTOM_CALLS. Measured here (jax 0.10.2, libtpu
    0.0.42.1, deviceless v6e): one 64-row sequence of JAXBench's 7p (no custom call) has
    optimal_seconds 0.764 ms, exactly its bytes accessed at HBM_BYTES_PER_S; two sequences (two
    `ConcatBitcast` calls, which emit no code) -1.99888, i.e. 1.124 ms of ops minus 2; all 64
    sequences (16 such calls) -15.96978: 30.2 ms minus 16. Inside a fusion a custom call (a gather's
    `GatherScatterIndicesBitpacked`) is priced with the fusion."""
    fused = set(_FUSION_CALLS.findall(hlo_text))
    out, computation = [], ""
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            computation = head.group(2)
            continue
        match = _INSTRUCTION.match(line)
        if not match or computation in fused or " custom-call(" not in match.group(2):
            continue
        target = _CUSTOM_CALL_TARGET.search(match.group(2))
        if target is None or target.group(1) not in PRICED_CUSTOM_CALLS:
            out.append(match.group(1))
    return out


def xla_model_seconds(cost: dict, hlo_text: str) -> tuple[float, str | None]:
    """XLA's model of the program's XLA ops (`optimal_seconds`), with the -1 s it counts for each op
    it cannot price (unpriced_custom_calls) taken back out; (0, why) where that cannot be done.

    The count is read twice, and used only where the readings agree: from the HLO (the unpriced
    calls), and from the total itself, which holds it exactly while the priced ops take under a
    second (n calls and a true time t in [0, 1) give a total in [-n, 1 - n): n = ceil(-total)).
    Before, any such call made the total negative and the whole model was dropped: JAXBench's 7p
    baseline (a Python loop over 64 sequences) was priced by its schedules alone, at 0.08 of its
    measured time, since most of its ops work on buffers XLA keeps in VMEM (no DMA to count)."""
    total = float(cost.get("optimal_seconds", 0.0) or 0.0)
    if total >= 0:
        # As before: a total that is not negative is taken as it stands (with an unpriced call in
        # it, the priced ops would take over a second: not a figure to correct by a reading).
        return total, None
    unpriced = unpriced_custom_calls(hlo_text)
    if not unpriced:
        return 0.0, f"XLA's cost model gave a negative time ({total:.6g} s) with no unpriced op to explain it"
    if math.ceil(-total) != len(unpriced):
        return 0.0, (f"XLA's cost model gave {total:.6g} s with {len(unpriced)} op(s) it prices at -1 s (e.g. "
                     f"{unpriced[0]}): the two readings of their count disagree, so the model is not used")
    return total + len(unpriced), None


def model_within_bound(seconds: float, cost: dict, hlo_text: str, loops: hlo_loops.ModuleLoops | None,
                       bandwidth: float) -> tuple[float, float]:
    """XLA's model (`seconds`, read back by xla_model_seconds) less the time of the bytes it counts
    beyond the most the program's ops can move (hlo_bytes.program_bound: each op's operands and
    results as laid out, a gather's indices and gathered slices rather than its operand per index);
    returns (seconds, the bytes taken out).

    XLA's TPU model charges a gather about 64 KiB per gathered element, and a scatter likewise
    (hlo_bytes.py): moe_topk_router's reference, three gathers of 32,768 elements from arrays of
    128 KiB-2 MiB, was charged 5.64 GB, 19x what all its ops hold, and priced at 7.6 ms against its
    schedules' 0.56 ms. A sum over ops above the sum of their bounds is over-charged by at least the
    difference: that difference is taken out at the bandwidth XLA's model prices bytes at
    (HBM_BYTES_PER_S is read off it), so an over-charged op keeps at least its bound's time. A
    program within the bound, or one that cannot be bounded (an op in a loop without a static trip
    count), keeps XLA's figure as it is."""
    counted = float(cost.get("bytes accessed", 0.0) or 0.0)
    if seconds <= 0 or counted <= 0:
        return seconds, 0.0
    bound = hlo_bytes.program_bound(hlo_text, loops)
    if bound.bytes is None or counted <= bound.bytes:
        return seconds, 0.0
    excess = counted - bound.bytes
    return max(0.0, seconds - excess / bandwidth), excess


# ---- ops that share one compiled program --------------------------------------------------------

_NAME = re.compile(r"%[\w.\-]+")
_METADATA = re.compile(r",?\s*metadata=\{[^{}]*\}")
_CALLS = re.compile(r"\bcalls=%?([\w.\-]+)")


def same_code_ops(hlo_text: str) -> dict[str, list[str]]:
    """For each instruction outside a fusion's body, every instruction (itself included) whose text
    is the same once names and metadata are left out, fused body included: ops that compile to the
    same code. libtpu compiles and dumps such a program once, under one op's name: the 64 copies of
    each per-sequence fusion in JAXBench's 7p baseline (a Python loop over sequences) left 96
    schedules for 3,918 ops, and each was counted once. Ops whose text differs in anything (a shape,
    a layout, a memory space, a backend config) are never put together."""
    bodies: dict[str, list[str]] = {}
    instructions: list[tuple[str, str, str]] = []   # (computation, name, right-hand side)
    computation = None
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            computation = head.group(2)
            bodies[computation] = []
            continue
        match = _INSTRUCTION.match(line)
        if computation is None or not match:
            continue
        bodies[computation].append(line)
        instructions.append((computation, *match.groups()))
    fused = set(_FUSION_CALLS.findall(hlo_text))

    def plain(text: str) -> str:
        return _METADATA.sub("", _NAME.sub("%", text))

    groups: dict[tuple, list[str]] = {}
    for computation, name, rest in instructions:
        if computation in fused:
            continue
        called = _CALLS.search(rest)
        body = "\n".join(plain(line) for line in bodies.get(called.group(1), [])) if called else ""
        groups.setdefault((plain(rest), body), []).append(name)
    return {name: names for names in groups.values() for name in names}


# ---- the traced program: what the static profile cannot count ----------------------------------

_READS = {"get", "load", "swap", "masked_load", "masked_swap", "addupdate"}
_GRID_INDEX = {"program_id", "num_programs"}


def _sub(eqn):
    # jaxpr_check.subjaxprs' twin: the estimator imports only its pricing helpers, so that
    # bench/tpu_estimate_calibration.py can load another checkout's estimator beside its own.
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                yield item.jaxpr
            elif hasattr(item, "eqns"):
                yield item


def _elements(var) -> int:
    count = 1
    for d in getattr(getattr(var, "aval", None), "shape", ()) or ():
        count *= int(d)
    return count


def _work(eqn) -> float:
    """A rough count of vector work: output elements, a matmul's scaled by its contraction/128."""
    if eqn.primitive.name in _READS or eqn.primitive.name in ("cond", "scan", "while"):
        return 0.0
    out = sum(_elements(v) for v in eqn.outvars)
    if eqn.primitive.name == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        k = 1
        for d in contract:
            k *= int(eqn.invars[0].aval.shape[d])
        return out * max(1.0, k / 128)
    return float(out)


def _float_matmul_flops(eqn) -> float:
    """2 x output elements x contraction of a floating-point dot_general (0 for anything else:
    integer and fp8 matmuls run faster than the bf16 peak this is divided by)."""
    if eqn.primitive.name != "dot_general":
        return 0.0
    dtypes = [getattr(getattr(v, "aval", None), "dtype", None) for v in eqn.invars[:2]]
    if any(d is None or str(d) not in ("bfloat16", "float16", "float32") for d in dtypes):
        return 0.0
    (contract, _), _ = eqn.params["dimension_numbers"]
    k = 1
    for d in contract:
        k *= int(eqn.invars[0].aval.shape[d])
    return 2.0 * k * sum(_elements(v) for v in eqn.outvars)


def _jaxpr_work(jaxpr, trips: bool = True) -> float:
    """The work proxy of a jaxpr: every branch's, the loops' bodies times their static trip
    counts (or once, trips=False, as a static schedule holds a loop body)."""
    total = 0.0
    for eqn in jaxpr.eqns:
        total += _work(eqn)
        subs = list(_sub(eqn))
        if eqn.primitive.name == "scan" and trips:
            total += int(eqn.params.get("length", 1)) * sum(_jaxpr_work(s, trips) for s in subs)
        else:
            total += sum(_jaxpr_work(s, trips) for s in subs)
    return total


def _sure_flops(jaxpr) -> float:
    """The floating-point matmul FLOPs a jaxpr runs whatever its branches decide: its own dots,
    the loops' bodies times their static trip counts, and no branch's."""
    total = 0.0
    for eqn in jaxpr.eqns:
        total += _float_matmul_flops(eqn)
        if eqn.primitive.name == "cond":
            continue
        subs = list(_sub(eqn))
        trips = int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else 1
        total += trips * sum(_sure_flops(s) for s in subs)
    return total


def _branch_flops(branches: list, index, evaluator) -> float:
    """A cond's matmul FLOPs per grid step: each branch's weighted by the share of grid steps whose
    index picks it where the index is evaluated, else the largest of them (an index the judge
    cannot evaluate, `pl.when(abs(k) >= 0)`, was floored by its least branch: the dot escaped the
    floor, 1.157x paid for 0.998x, red team round 10)."""
    import numpy as np
    flops = [_sure_flops(b) for b in branches]
    if not flops:
        return 0.0
    if evaluator is None or index is None:
        return max(flops)
    picks = np.clip(np.asarray(index).astype(int).reshape(-1), 0, len(flops) - 1)
    return float(np.mean(np.asarray(flops)[picks]))


def _is_ref(var) -> bool:
    return "Ref" in type(getattr(var, "aval", None)).__name__


class _GridEval:
    """Evaluates scalar grid-index expressions over every grid point (numpy), for the share of
    grid steps on which a `pl.when` runs. Unknown primitives make the value unknown (None)."""

    def __init__(self, grid):
        import numpy as np
        self.np = np
        self.grid = [int(g) for g in grid]
        total = _points(self.grid)
        if total <= GRID_POINTS_LIMIT:
            self.index = np.indices(self.grid).reshape(len(self.grid), -1) if self.grid else np.zeros((0, 1), int)
        else:  # a uniform sample, seeded (the same share every time), with the first and last step
            rng = np.random.default_rng(20261206)
            flat = np.concatenate([[0, total - 1], rng.integers(0, total, GRID_POINTS_LIMIT - 2)])
            self.index = np.stack(np.unravel_index(flat, self.grid))
        self.points = int(self.index.shape[1])

    def value(self, eqn, args):
        np = self.np
        name = eqn.primitive.name
        if name in ("program_id", "num_programs") and int(eqn.params["axis"]) >= len(self.grid):
            return None  # a grid known only at run time: the share is unknown, never guessed
        if name == "program_id":
            return self.index[int(eqn.params["axis"])]
        if name == "num_programs":
            return np.full(max(self.points, 1), self.grid[int(eqn.params["axis"])])
        ops = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal, "add": np.add, "sub": np.subtract, "mul": np.multiply,
               "max": np.maximum, "min": np.minimum}
        unary = {"neg": np.negative, "abs": np.abs, "sign": np.sign}
        if any(a is None for a in args):
            return None
        args = [np.asarray(a) for a in args]
        if name in ("and", "or", "xor") and len(args) == 2:
            logical = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[name]
            bitwise = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
            return logical(*args) if args[0].dtype == bool else bitwise(*args)
        if name in ("rem", "div") and len(args) == 2:
            a, b = args
            if a.dtype.kind not in "iu" or np.any(b == 0):
                return None  # a real quotient, or one by zero: not a grid index the share is read from
            # Truncated toward zero, as lax.rem / lax.div and the chip do (numpy's // and % round
            # toward minus infinity: rem(k - 10000, 100000) <= 0 was never true to the judge and
            # always true on the chip, red team round 10).
            quotient = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
            return quotient if name == "div" else a - quotient * b
        if name == "clamp" and len(args) == 3:
            return np.clip(args[1], args[0], args[2])
        if name in xla_ints.SHIFTS and len(args) == 2:
            dtype = np.dtype(eqn.outvars[0].aval.dtype)  # the grid's indices are int64 here; XLA's width
            return xla_ints.shift(name, args[0].astype(dtype), args[1].astype(dtype))
        if name == "integer_pow" and len(args) == 1:
            return np.power(args[0], int(eqn.params["y"]))
        if name in ops and len(args) == 2:
            return ops[name](args[0], args[1])
        if name in unary and len(args) == 1:
            return unary[name](args[0])
        if name == "not":
            return np.logical_not(args[0]) if args[0].dtype == bool else np.invert(args[0])
        if name == "convert_element_type":
            return args[0].astype(np.int64) if np.asarray(args[0]).dtype != bool else args[0]
        if name == "select_n" and len(args) >= 2:
            return np.choose(np.asarray(args[0]).astype(int), args[1:])
        return None


class KernelFacts:
    """What the trust rules found in one kernel's jaxpr."""

    def __init__(self, name: str, grid):
        self.name = name
        self.grid = grid
        self.reasons: list[str] = []         # in every mode
        self.branch_reasons: list[str] = []  # in "profile" mode (it counts one path of a branch)
        self.unconditional = 0.0
        self.missed = 0.0  # conditional work x the share of grid steps that run it
        self.mxu_flops = 0.0    # a grid step's floating-point matmul FLOPs outside any branch
        self.step_bytes = 0.0   # bytes of the blocks copied in and out at each grid step
        self.once_bytes = 0.0   # operands left in HBM/ANY (copied by the kernel's own DMAs): once at least
        self.operand_bytes = 0.0
        self.traffic: pipeline_model.BlockTraffic | None = None  # the grid pipeline's copies


def _analyse_kernel(name, jaxpr, grid, facts: KernelFacts) -> None:
    import numpy as np
    static_grid = all(isinstance(g, int) for g in grid)
    evaluator = _GridEval(grid) if static_grid else None
    tainted: set = set(v for v in jaxpr.invars)
    values: dict = {}

    def literal(v):
        return hasattr(v, "val") and not hasattr(v, "count")

    def is_tainted(v):
        return (not literal(v)) and v in tainted

    def val(v):
        if literal(v):
            return np.asarray(v.val)
        return values.get(v)

    def walk(jx, share: float, under_cond: bool):
        for eqn in jx.eqns:
            prim = eqn.primitive.name
            ins_tainted = any(is_tainted(v) for v in eqn.invars) or any(_is_ref(v) for v in eqn.invars)
            if prim == "while":
                facts.reasons.append(f"kernel {name}: a loop with a trip count known only at run time (while_loop or "
                                     f"fori_loop with traced bounds): the static figures count its body once")
            if prim == "cond":
                predicate = eqn.invars[0]
                branches = list(_sub(eqn))
                work = max((_jaxpr_work(b) for b in branches), default=0.0)
                if is_tainted(predicate) or _is_ref(predicate):
                    facts.branch_reasons.append(f"kernel {name}: a branch (lax.cond / pl.when) on data read at run time: the "
                                         f"static profile counts one path")
                    # A branch on data is priced as taken at every step (the schedule's bundles hold
                    # both paths), and so is its matmul at the MXU's peak: a GEMM's dot under
                    # pl.when(a == a) was paid 1.157x against 0.998x for the same work without it
                    # (red team, round 7).
                    facts.mxu_flops += share * max((_sure_flops(b) for b in branches), default=0.0)
                else:
                    frac = 1.0
                    if evaluator is not None and val(predicate) is not None:
                        index = np.asarray(val(predicate)).astype(int)
                        if index.ndim == 0:
                            index = np.full(max(evaluator.points, 1), int(index))
                        frac = float(np.mean(index != 0)) if len(branches) == 2 else 1.0
                    facts.missed += share * frac * work
                    # The MXU floor holds the matmuls a branch surely runs too, weighted by the
                    # steps that take it: a dot under an always-true pl.when (k < nk) is as much
                    # work as one outside, and left out it escaped the floor (red team, round 6:
                    # 1.157x against 0.998x for the same GEMM).
                    facts.mxu_flops += share * _branch_flops(branches, val(predicate), evaluator)
                for b in branches:
                    # A branch's operands are what they are outside: data stays data inside (a data
                    # predicate handed into a position pl.when was taken for an unevaluated grid index,
                    # floored by the least branch: 752.7x paid, red team round 10), positions keep
                    # their values.
                    for inner, outer in zip(b.invars, eqn.invars[1:]):
                        if is_tainted(outer) or _is_ref(outer):
                            tainted.add(inner)
                        elif val(outer) is not None:
                            values[inner] = val(outer)
                    walk(b, share, True)
                for v in eqn.outvars:
                    tainted.add(v)
                continue
            if prim == "scan":
                length = int(eqn.params.get("length", 1))
                before = facts.unconditional
                for b in _sub(eqn):
                    tainted.update(b.invars)
                    walk(b, share * length, under_cond)
                for v in eqn.outvars:
                    tainted.add(v)
                del before
                continue
            subs = list(_sub(eqn))
            if subs:
                for b in subs:
                    tainted.update(b.invars)
                    walk(b, share, under_cond)
                tainted.update(eqn.outvars)
                continue
            if not under_cond:
                facts.unconditional += share * _work(eqn)
                facts.mxu_flops += share * _float_matmul_flops(eqn)
            if prim in _READS or ins_tainted:
                tainted.update(eqn.outvars)
            elif evaluator is not None:
                out = evaluator.value(eqn, [val(v) for v in eqn.invars])
                if out is not None and len(eqn.outvars) == 1:
                    values[eqn.outvars[0]] = out

    walk(jaxpr, 1.0, False)


def _points(grid) -> int:
    n = 1
    for g in grid:
        n *= int(g)
    return n


def _aval_bytes(aval) -> float:
    inner = getattr(aval, "inner_aval", aval)
    shape, dtype = getattr(inner, "shape", None), getattr(inner, "dtype", None)
    if shape is None or dtype is None:
        return 0.0
    count = 1
    for d in shape:
        count *= int(d)
    return float(count * dtype.itemsize)


def _block_bytes(eqn, mapping, facts: KernelFacts) -> None:
    """The bytes a grid step copies (its blocks in VMEM: every step, as if none were reused) and
    the operands the kernel copies itself (left in HBM: once at least)."""
    for bm in getattr(mapping, "block_mappings", ()) or ():
        block = getattr(bm, "transformed_block_aval", None) or getattr(bm, "block_aval", None)
        space = str(getattr(block, "memory_space", "")).lower()
        array = _aval_bytes(getattr(bm, "array_aval", None))
        facts.operand_bytes += array
        if any(word in space for word in ("any", "hbm")):
            facts.once_bytes += array
        elif not any(word in space for word in ("smem", "semaphore")):
            facts.step_bytes += _aval_bytes(block)


def analyse_program(closed_jaxpr) -> tuple[list[KernelFacts], list[str]]:
    """Per pallas_call the trust rules' findings, and the program-level reasons."""
    kernels: list[KernelFacts] = []
    reasons: list[str] = []

    def walk(jaxpr, enclosing: tuple):
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            if prim == "pallas_call":
                mapping = eqn.params.get("grid_mapping")
                grid = tuple(getattr(mapping, "grid", ()) or ())
                name = str(eqn.params.get("name") or getattr(eqn.params.get("name_and_src_info"), "name", "kernel"))
                facts = KernelFacts(name, grid)
                if not all(isinstance(g, int) for g in grid):
                    facts.reasons.append(f"kernel {name}: a grid whose size is known only at run time {grid}: the "
                                         f"static profile cannot count its steps")
                if enclosing:
                    facts.reasons.append(f"kernel {name}: a pallas_call inside {'/'.join(enclosing)} of the program: "
                                         f"the static figures count the kernel once")
                kernel_jaxpr = eqn.params["jaxpr"]
                _analyse_kernel(name, getattr(kernel_jaxpr, "jaxpr", kernel_jaxpr),
                                grid if all(isinstance(g, int) for g in grid) else (), facts)
                steps = _points(grid) if all(isinstance(g, int) for g in grid) else 1
                _block_bytes(eqn, mapping, facts)
                # The compiled call takes the scalar-prefetch operands too (splash attention's
                # mask tables: megabytes), which no block maps.
                for var in eqn.invars[:int(getattr(mapping, "num_index_operands", 0) or 0)]:
                    facts.operand_bytes += _aval_bytes(getattr(var, "aval", None))
                if mapping is not None and all(isinstance(g, int) for g in grid):
                    facts.traffic = pipeline_model.block_traffic(mapping)
                if facts.missed > CONDITIONAL_WORK_LIMIT * max(facts.unconditional, 1.0):
                    facts.branch_reasons.append(
                        f"kernel {name}: work under pl.when/lax.cond is {facts.missed / max(facts.unconditional, 1.0):.2f}x "
                        f"the unconditional work of a grid step (weighted by the steps that run it): the static "
                        f"profile does not count it")
                del steps
                kernels.append(facts)
                continue
            if prim in ("while", "cond"):
                reasons.append(f"an XLA {'while loop' if prim == 'while' else 'branch (lax.cond)'} in the program: its "
                               f"trip count or branch is known only at run time")
            inner = enclosing + ((prim,) if prim in ("while", "cond", "scan") else ())
            for sub in _sub(eqn):
                walk(sub, inner)

    walk(closed_jaxpr.jaxpr, ())
    return kernels, reasons


# ---- the estimate -------------------------------------------------------------------------------

@dataclasses.dataclass
class KernelProfile:
    kernel: str
    hlo_op: str
    grid_steps: int
    estimated_cycles: int
    bundles_per_step: float | None
    bytes: float
    seconds: float
    bound: str              # "cycles" or "hbm"
    unit_share: dict | None = None
    critical_path_cycles: int | None = None

    def as_json(self) -> dict:
        return {"kernel": self.kernel, "grid_steps": self.grid_steps, "bundles_per_step": self.bundles_per_step,
                "estimated_cycles": self.estimated_cycles, "unit_share": self.unit_share,
                "critical_path_cycles": self.critical_path_cycles, "hbm_bytes": self.bytes, "bound": self.bound,
                "estimated_us": self.seconds * 1e6}


@dataclasses.dataclass
class Estimate:
    seconds: float
    mosaic_cycles: int
    mosaic_seconds: float
    xla_seconds: float      # the XLA ops' part
    xla_model_seconds: float
    xla_llo_cycles: int     # the XLA ops' static cycles (their profile, or their final schedules)
    method: str
    mode: str
    trusted: bool
    reasons: list[str]
    kernels: list[KernelProfile]
    xla_floor_seconds: float = 0.0   # the XLA ops' schedules, each the larger of its cycles and its DMAs' bytes
    xla_excess_bytes: float = 0.0    # bytes XLA's model counted beyond what the ops can move (taken out)

    @property
    def microseconds(self) -> float:
        return self.seconds * 1e6


def fresh(fn):
    """A new function object calling fn: jax caches executables per function, and a cached one
    is not compiled again, so libtpu dumps nothing for it."""
    def call(*args):
        return fn(*args)
    return call


# The most partial pairings _match tries before it gives up (and pairs nothing).
PAIRING_SEARCH_LIMIT = 100_000


def _match(hlo_kernels, facts, independent=frozenset()) -> list:
    """The traced pallas_call of each compiled Mosaic kernel, or None for every kernel.

    XLA compiles each call to one kernel and keeps the order of calls that depend on each other
    (the compiled kernels come in an order the data allow), but may run independent calls in any
    order (`independent`: kernel_order.independent_pairs). Every assignment of calls to kernels
    that keeps those orders and whose operand bytes agree pair by pair is considered: the kernels
    are paired when all of them give each kernel a call of the same kind (the same kernel, grid,
    blocks and work: which of two such calls is which changes no price). An assignment with a call
    of another kind anywhere (a compiled kernel whose bytes would pair it just as well with
    another, different call that XLA was free to run before or after it) pairs nothing. Before,
    the kernels had to come in the traced order: a program whose independent calls XLA reordered
    (mla_attention's starter: its k_pe down-projection compiled first) paired nothing."""
    n = len(hlo_kernels)
    if n != len(facts):
        return [None] * n

    # Within 1% either way: the compiled call may take an operand the trace had twice once (2p's
    # splash attention: 2 MiB fewer of 2.16 GB), or extra outputs of its own.
    def fits(k, f):
        return f.operand_bytes <= 0 or abs(k.bytes - f.operand_bytes) <= max(0.01 * f.operand_bytes, 1 << 16)

    def kind(f):
        return (f.name, tuple(f.grid), f.step_bytes, f.mxu_flops, f.unconditional)

    # The calls each call depends on (they come before it in the trace, and in the compiled order).
    before = [frozenset(i for i in range(j) if frozenset({i, j}) not in independent) for j in range(n)]
    after = [frozenset(j for j in range(n) if i in before[j]) for i in range(n)]
    # Calls of one kind and operand bytes with the same calls before and after them, and
    # independent of each other, can trade places in any assignment without changing it: only the
    # first is tried (ten such calls would otherwise be tried in 10! orders).
    twin_of = list(range(n))
    for j in range(n):
        for i in range(j):
            if twin_of[i] == i and kind(facts[i]) == kind(facts[j]) and \
                    facts[i].operand_bytes == facts[j].operand_bytes and before[i] == before[j] \
                    and after[i] == after[j] and i not in before[j]:
                twin_of[j] = i
                break
    kinds: set = set()          # the kind sequences of the complete assignments found
    first: list[int] = []       # one complete assignment (call index per compiled kernel)
    budget = [PAIRING_SEARCH_LIMIT]

    def search(chosen: list[int], used: set) -> bool:
        # False stops the search: a second kind sequence, or the budget spent.
        budget[0] -= 1
        if budget[0] < 0:
            return False
        p = len(chosen)
        if p == n:
            kinds.add(tuple(kind(facts[j]) for j in chosen))
            if not first:
                first.extend(chosen)
            return len(kinds) < 2
        tried = set()
        for j in range(n):
            if j in used or not before[j] <= used or twin_of[j] in tried or not fits(hlo_kernels[p], facts[j]):
                continue
            tried.add(twin_of[j])
            chosen.append(j)
            used.add(j)
            going = search(chosen, used)
            chosen.pop()
            used.discard(j)
            if not going:
                return False
        return True

    search([], set())
    if budget[0] < 0 or len(kinds) != 1:
        return [None] * n
    return [facts[j] for j in first]


def estimate(fn=None, specs=None, target=None, dump_dir=None, *, compiled=None, closed_jaxpr=None,
             mode: str = DEFAULT_MODE, trusted_code: bool = False) -> Estimate:
    """The estimated device time of `fn` at `specs` on `target` (a tpu_target.Target), from the
    dump that `apply_environment(scratch, mode)` switched on.

    compiled: a tpu_target.Compiled of the program done with nothing compiled since (its files
    must still be in dump_dir); without it fn is compiled here, after clearing the folder.
    closed_jaxpr: the traced program (for the trust rules and the grids); without it fn is traced.
    trusted_code: the program is the task's own (its reference), not a candidate's. XLA compiles
    some ops into Mosaic kernels of its own (an attention's online softmax) that no pallas_call
    traced: in trusted code, when the program has no pallas_call at all, they are priced by their
    schedules like any kernel instead of making the estimate untrusted for want of a pairing.
    (Unpaired, their grid steps are unknown: the per-step overhead and the blocks' bytes are left
    out, which can only make the reference look faster, and a candidate's speedup smaller.)"""
    from . import tpu_target
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    name = target.name
    if closed_jaxpr is None and fn is not None:
        import jax
        closed_jaxpr = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in specs])
    if compiled is None:
        # As the judge compiles a candidate (evaluation.py): without the kernels' declared
        # pl.CostEstimate, which XLA's model would add to the XLA ops' figure.
        from jax._src import core
        from . import jaxpr_check
        if closed_jaxpr is None:
            raise ValueError("estimate() needs fn (and specs), closed_jaxpr or compiled")
        clear_dump(dump_dir)
        program = jaxpr_check.set_pallas_params(closed_jaxpr, cost_estimate=None)
        compiled = tpu_target.compile_for(target, core.jaxpr_as_fun(program), specs)
    reasons: list[str] = []
    if not dump_enabled(dump_dir, mode):
        reasons.append(f"the {mode} dump is not enabled in LIBTPU_INIT_ARGS")
    cycles = read_profiles(dump_dir) if mode == "profile" and dump_dir is not None else {}
    bundles = read_utilization(dump_dir) if mode == "bundles" and dump_dir is not None else {}
    schedules = read_schedules(dump_dir) if mode == "bundles" and dump_dir is not None else {}
    hlo_text = compiled.executable.as_text() or ""
    hlo_kernels, _ = mosaic_kernels(hlo_text)
    loops = hlo_loops.module_loops(hlo_text)
    if hlo_kernels and not (cycles or schedules):
        reasons.append("the compile dumped nothing (jax reused a cached executable, or libtpu did not dump): no "
                       "figures for the kernels")
    if closed_jaxpr is None:
        reasons.append("no traced program to check the trust rules on")
        facts, program_reasons = [], []
    else:
        facts, program_reasons = analyse_program(closed_jaxpr)
    reasons.extend(program_reasons)
    for f in facts:
        reasons.extend(f.reasons)
        if mode == "profile":
            reasons.extend(f.branch_reasons)
    from . import kernel_order
    matched = _match(hlo_kernels, facts, kernel_order.independent_pairs(closed_jaxpr) if closed_jaxpr is not None
                     else frozenset())
    xla_own_kernels = trusted_code and not facts and closed_jaxpr is not None
    if facts and not hlo_kernels:
        # XLA deletes a pallas_call whose result nothing uses (a mask folded to zero at the full
        # size multiplies it away): the kernel that was checked is not the program that is priced.
        reasons.append(f"{len(facts)} pallas_calls traced and no Mosaic kernel compiled: the compiler deleted the "
                       f"kernels, so what is priced is not the checked program")
    if hlo_kernels and any(m is None for m in matched) and not xla_own_kernels:
        reasons.append(f"{len(facts)} pallas_calls traced, {len(hlo_kernels)} Mosaic kernels compiled, and they do "
                       f"not pair up by their operands (or pair up in more than one way): the grids cannot be assigned")
    clock, bandwidth = CLOCK_HZ[name], HBM_BYTES_PER_S[name]
    kernel_names = {k.name for k in hlo_kernels}
    # Ops compiled to the same code: libtpu dumps one program for all of them.
    twins = same_code_ops(hlo_text)
    profiles: list[KernelProfile] = []
    mosaic_cycles, mosaic_seconds = 0, 0.0
    # XLA's own kernels whose loops run a number of times, or whose copies move a number of bytes,
    # known only at run time (libtpu's ragged dot walks the (row tile, group) pairs its metadata
    # kernel counts from group_sizes) cannot be priced by their schedules. In trusted code they are
    # priced as XLA ops are: by XLA's model, which holds the cost libtpu declares for such a kernel
    # (the ragged dot's: 2 x M x K x N FLOPs and its operands' bytes), and by their schedules with
    # each such loop counted once and each such copy left out; both are lower bounds, the larger is
    # taken (below). Not refused: a lower bound of the reference's time can only make a
    # candidate's speedup smaller. A candidate's kernels are always paired with their
    # pallas_calls, so this never prices one.
    own_unknown_seconds = 0.0

    def own_on_xla_side(f) -> bool:
        return xla_own_kernels and f is None and mode == "bundles"

    for k, f in zip(hlo_kernels, matched):
        # In trusted code (a task's reference) a kernel in a loop with a static trip count (lax.map
        # over heads) is priced for every trip; a candidate's pallas_call in a loop stays untrusted
        # (analyse_program says why).
        runs = 1 if k.in_entry else (loops.runs.get(k.computation) if trusted_code else None)
        if runs is None:
            reasons.append(f"Mosaic kernel {k.name} sits in HLO computation {k.computation} (a loop or branch "
                           f"without a static trip count): it is counted once")
            runs = 1
        own_unknown = False  # XLA's own kernel with run-time trips or copy sizes, in trusted code: with the XLA ops
        static_grid = f is not None and all(isinstance(g, int) for g in f.grid)
        steps = _points(f.grid) if static_grid else 0
        share = None
        if mode == "profile":
            c = for_op_or_twin(cycles, k.name, kernel_names, twins)
            if c is None:
                reasons.append(f"no static profile was written for Mosaic kernel {k.name}")
            c = int(c or 0)
            per_step = c / steps if steps else None
            moved = k.bytes
            traffic = None
        else:
            schedule = for_op_or_twin(schedules, k.name, kernel_names, twins)
            use = for_op_or_twin(bundles, k.name, kernel_names, twins)
            stall = manual_bytes = 0.0
            if schedule is None:
                reasons.append(f"no final schedule was dumped for Mosaic kernel {k.name}")
                executed, per_step = 0.0, None
            else:
                executed = schedule.executed
                own_unknown = bool(schedule.unknown_trips or schedule.unknown_dma_sizes) and own_on_xla_side(f)
                if schedule.unknown_trips and not own_unknown:
                    reasons.append(f"Mosaic kernel {k.name}: {schedule.unknown_trips} loop(s) in its final schedule "
                                   f"without a constant trip count (its start, bound or step is known only at run "
                                   f"time, or not read): counted once")
                if schedule.unknown_dma_sizes and not own_unknown:
                    reasons.append(f"Mosaic kernel {k.name}: {schedule.unknown_dma_sizes} DMA(s) whose size is known "
                                   f"only at run time")
                if steps > 1 and not any(t is not None and t >= steps for _, t, _ in schedule.loops):
                    # no grid loop seen (an unrolled grid is counted as it stands): every bundle a step
                    executed = max(executed, float(steps * schedule.bundles))
                per_step = (executed / steps) if steps else float(schedule.bundles)
                # The kernel's own copies: each wait stalls for what its copy's latency and bytes
                # leave uncovered (llo_schedule.manual_dma_stall_cycles).
                stall = llo_schedule.manual_dma_stall_cycles(schedule, DMA_LATENCY_CYCLES[name], bandwidth / clock)
                manual_bytes = schedule.dma_bytes(pipeline=False)
            share = dict(use.unit_share) if use else None
            if share is not None and schedule is not None and schedule.bundles:
                share["dma"] = schedule.dma_bundles / schedule.bundles
            c = int(round(executed + stall + max(steps, 1) * STEP_OVERHEAD_CYCLES[name]))
            traffic = f.traffic if f is not None and f.traffic is not None and steps else None
            pipelined = traffic.total if traffic is not None else (steps * f.step_bytes if f is not None else 0.0)
            moved = max(k.bytes, pipelined + max(manual_bytes, f.once_bytes if f is not None else 0.0))
            if f is None and schedule is not None:
                # A kernel no pallas_call traced (XLA's own, in a reference): its schedule's copies.
                moved = max(moved, schedule.executed_dma_bytes())
        c, moved, steps = c * runs, moved * runs, steps * runs
        s_cycles, s_bytes = c / clock, moved / bandwidth
        if mode == "bundles" and f is not None and steps:
            # The MXU cannot beat its peak: a schedule issues a matmul in fewer bundles than the
            # MXU takes to run it (a 512x1024x1024 bf16 block on v5e: 7,796 bundles for 8,192
            # MXU cycles), so the FLOPs at the chip's bf16 peak floor the compute.
            s_cycles = max(s_cycles, steps * f.mxu_flops / tpu_target.TARGETS[name][2])
        if mode == "bundles" and traffic is not None:
            # The grid pipeline as it runs (pipeline_model.py): the first fetch and the last write-back
            # overlap nothing, the others the steps' compute; all of it at least the bytes' time.
            s_pipe = runs * pipeline_model.pipeline_seconds(s_cycles / runs, traffic, bandwidth)
            seconds = max(s_pipe, s_bytes)
            bound = "hbm" if s_bytes >= s_pipe else ("pipeline" if s_pipe > s_cycles * 1.0001 else "cycles")
        elif mode == "bundles" and f is None and schedule is not None and UNPAIRED_COPIES_SERIAL:
            # XLA's own kernel (a reference's online softmax): no pallas_call traced, so no grid and
            # no blocks to run the pipeline model on. Its copies are priced beside its compute, not
            # under it (UNPAIRED_COPIES_SERIAL says why).
            seconds = s_cycles + s_bytes
            bound = "cycles+hbm"
        else:
            seconds = max(s_cycles, s_bytes)
            bound = "cycles" if s_cycles >= s_bytes else "hbm"
        if own_unknown:
            bound = "xla-side"
        profiles.append(KernelProfile(kernel=f.name if f else k.name, hlo_op=k.name, grid_steps=steps,
                                      estimated_cycles=c, bundles_per_step=per_step, bytes=moved,
                                      seconds=seconds, bound=bound, unit_share=share))
        if own_unknown:
            own_unknown_seconds += seconds
            continue
        mosaic_cycles += c
        mosaic_seconds += seconds
    kernel_keys = kernel_names | {_key_for(cycles or schedules, n, kernel_names) for n in kernel_names} - {None}
    xla_ops = [op for op in (cycles or schedules) if op not in kernel_keys and not op.startswith(("<", "TLP"))]
    # The XLA ops' own static cycles: the profile's ("profile" mode), or their final schedules'
    # ("bundles"). Not the kernels', which are priced above.
    # How often each op's schedule runs: per trip of the loops around it (an op in a loop with a
    # static trip count, else once), and for every op compiled to the same code (same_code_ops),
    # whose program libtpu dumped once under this op's name.
    twins = twins if mode == "bundles" else {}
    runs = {op: sum(loops.runs_of_instruction(n) or 1 for n in twins.get(op, [op])
                    if n == op or n not in schedules) for op in xla_ops}
    if mode == "profile":
        xla_llo = sum(c for op, c in cycles.items() if op not in kernel_keys)
    else:
        # An op in a loop with a static trip count runs that many times; otherwise it is counted
        # once (XLA's model, the other bound, counts it once too).
        xla_llo = int(round(sum(schedules[op].executed * runs[op] for op in xla_ops)))
    # Per op, its schedule is also floored by the copies it issues itself (its DMAs' bytes, each
    # counted on the trips its loop's scalar code runs it, its streams added: executed_dma_bytes)
    # at the HBM bandwidth: a memory-bound fusion takes its bytes' time however few bundles it has
    # (an attention's score matrix written and read back).
    xla_floor = xla_llo / clock if mode == "profile" else sum(
        runs[op] * max(schedules[op].executed / clock, schedules[op].executed_dma_bytes() / bandwidth)
        for op in xla_ops) + own_unknown_seconds
    uncounted = ([n for op in xla_ops for n in twins.get(op, [op]) if (n == op or n not in schedules)
                  and loops.in_uncounted_loop(n)] if mode == "bundles" else [])
    if uncounted:
        reasons.append(f"{len(uncounted)} XLA op(s) in the body of a while loop without a static trip count (e.g. "
                       f"{uncounted[0]}): counted once")
    # XLA's model, with the -1 s it counts for each op it cannot price taken back out.
    xla_model, model_reason = xla_model_seconds(compiled.cost, hlo_text)
    # ... and without the bytes it charges beyond what the ops can move (gathers, scatters).
    xla_model, xla_excess = model_within_bound(xla_model, compiled.cost, hlo_text, loops, bandwidth)
    # Each source misses something. XLA's model prices transcendentals at nothing (exp(sin(x) x)
    # on 16M floats: the profile 432,950 cycles, the model a copy's time) and convolutions as if
    # the MXU were full; the static figures count a loop's body once and know no HBM bandwidth.
    # Both are lower bounds: the larger is taken.
    xla_seconds = max(xla_model, xla_floor)
    if xla_ops and xla_model == 0.0:
        reasons.append("XLA ops were compiled but XLA's cost model gave no time for them"
                       + (f" ({model_reason})" if model_reason else ""))
    if not hlo_kernels and xla_seconds == 0.0:
        reasons.append("neither a Mosaic kernel nor an XLA figure: nothing to estimate")
    seconds = mosaic_seconds + xla_seconds
    return Estimate(seconds=seconds, mosaic_cycles=mosaic_cycles, mosaic_seconds=mosaic_seconds,
                    xla_seconds=xla_seconds, xla_model_seconds=xla_model, xla_llo_cycles=xla_llo,
                    xla_floor_seconds=xla_floor, xla_excess_bytes=xla_excess,
                    method=METHODS[mode], mode=mode, trusted=not reasons and seconds > 0, reasons=reasons,
                    kernels=profiles)
