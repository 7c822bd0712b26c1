"""The most bytes the ops of an optimized HLO module can move: a bound on XLA's `bytes accessed`.

XLA's cost model (`cost_analysis()`) is a sum over the scheduled ops, and no op moves more than its
operands and results hold, as laid out in memory (each array's minor dimensions padded to its tile:
`f32[4096,8]{1,0:T(8,128)}` holds 4096 x 128 floats), a fusion's operands read once per use (below).
An op that reads part of
an operand chosen at run time reads that part only, as XLA's own generic cost analysis
(HloCostAnalysis::HandleGather, HandleDynamicSlice) counts it:

  * a gather reads its indices and the gathered slices (its result: one slice per index), not its
    operand once per index;
  * a dynamic-slice reads its start indices and its slice (its result).

A fusion may read an operand once for each of its uses (the paths from the parameter to the fusion's
root, as XLA's fusion cost analysis counts them), and an operand that gathers or dynamic-slices take
slices of only those slices. The sum over the module's ops, an op in a loop body with a static trip
count counted per trip (hlo_loops.py), is what the program can move at most; XLA's model counts
each op once, so the sum is larger than any figure it could honestly give.

Why it is needed: XLA's TPU model charges a gather about 64 KiB per gathered element whatever it
reads (measured here, jax 0.10.2, libtpu 0.0.42.1, deviceless v5e: `jnp.take_along_axis` of
f32[4096,128] at s32[4096,8] is charged 2.154 GB for a 2 MiB operand, 128 KiB of indices and a
128 KiB result; 4x fewer index rows, 4x fewer bytes; a 2x wider operand, the same). A program's bytes
beyond the bound are bytes no op can move: the estimator takes their time back out of XLA's model
(tpu_estimate.model_within_bound).
"""
from __future__ import annotations

import dataclasses
import re

from . import hlo_loops

_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
# One array type with its layout: dtype[dims]{minor_to_major:tiles and memory space}
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8\w*|token)\[([\d,]*)\](?:\{([^{}]*)\})?")
_TILE = re.compile(r"T\(([\d,]+)\)")
_COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"^([\w\-]+)\((.*)$")
_CALLS = re.compile(r"\bcalls=%?([\w.\-]+)")
_TO_APPLY = re.compile(r"\bto_apply=%?([\w.\-]+)")
_PARAMETER = re.compile(r"^\s*(\d+)\s*\)")
_MOSAIC = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*\bcustom-call\(.*custom_call_target=\"tpu_custom_call\"", re.M)
# Ops that read a part of their operand 0 chosen at run time: that part is their result.
_SLICING = ("gather", "dynamic-slice")
# Ops that move no bytes of their own (views, the program's inputs, the parts of a tuple).
_NO_BYTES = ("parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all", "partition-id",
             "replica-id")


def _dtype_bytes(dtype: str) -> float:
    if dtype.startswith("f8"):
        return 1
    return _DTYPE_BYTES.get(dtype, 0 if dtype == "token" else 4)


def array_bytes(dtype: str, dims: str, layout: str | None) -> float:
    """Bytes of one array as laid out: the dimensions its first tile covers (the most minor ones,
    in the layout's order) rounded up to the tile."""
    sizes = [int(d) for d in dims.split(",") if d]
    padded = list(sizes)
    if layout:
        order_text, _, rest = layout.partition(":")
        order = [int(d) for d in order_text.split(",") if d.strip().isdigit()]
        tile = _TILE.search(rest)
        if tile and len(order) == len(sizes):
            tile_dims = [int(t) for t in tile.group(1).split(",")]
            major_to_minor = list(reversed(order))
            # the tile's last dimension covers the most minor array dimension, and so on
            for k, t in enumerate(reversed(tile_dims)):
                if k < len(major_to_minor) and t > 0:
                    d = major_to_minor[-1 - k]
                    padded[d] = -(-sizes[d] // t) * t
    count = 1
    for d in padded:
        count *= d
    return count * _dtype_bytes(dtype)


def shape_bytes(shape: str) -> float:
    """Bytes of every array in an instruction's shape (a tuple's elements added), as laid out."""
    return sum(array_bytes(*m) for m in _ARRAY.findall(shape))


@dataclasses.dataclass
class _Op:
    name: str
    opcode: str
    shape: str
    operands: list[str]
    tail: str
    parameter: int | None = None
    root: bool = False


def _parse(hlo_text: str) -> tuple[dict[str, list[_Op]], set[str]]:
    """{computation: its instructions}, and the computations that are part of one op: a fusion's
    (or an async op's) body, a reduction's or a sort's scalar function (`to_apply` of anything but
    a `call`)."""
    computations: dict[str, list[_Op]] = {}
    fused: set[str] = set()
    current = None
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            current = computations.setdefault(head.group(2), [])
            continue
        match = _INSTRUCTION.match(line) if current is not None else None
        if not match:
            continue
        root, name, rest = match.groups()
        shape, after = hlo_loops.split_shape(rest)
        op = _OPCODE.match(after)
        if not op:
            continue
        opcode, tail = op.groups()
        parameter = None
        if opcode == "parameter":
            number = _PARAMETER.match(tail)
            parameter = int(number.group(1)) if number else None
        fused.update(_CALLS.findall(tail))
        if opcode != "call":
            fused.update(_TO_APPLY.findall(tail))
        operands = [] if opcode in ("constant", "parameter", "iota") else hlo_loops.operand_names(tail)
        current.append(_Op(name, opcode, shape, operands, tail, parameter, bool(root)))
    return computations, fused


def _fusion_operand_reads(body: list[_Op]) -> dict[int, float]:
    """{parameter number: how many times over the fusion may read it} (a multiple of its bytes).

    The fusion evaluated op by op, each use reading its operand afresh: the paths from the
    parameter to the root, as XLA's own fusion cost analysis counts them (an operand used by two
    ops that both reach the root may be read twice), except that a gather or dynamic-slice reads
    only its slices of its operand 0 (their bytes over the operand's: each slice read, more than
    the array holds where indices repeat). A parameter no path reaches is not read."""
    shapes = {op.name: op.shape for op in body}
    needed: dict[str, float] = {op.name: 1.0 for op in body if op.root}
    for op in reversed(body):   # HLO text defines each value before its uses
        times = needed.get(op.name, 0.0)
        if not times:
            continue
        for position, operand in enumerate(op.operands):
            share = 1.0
            if op.opcode in _SLICING and position == 0:
                whole = shape_bytes(shapes.get(operand, ""))
                share = shape_bytes(op.shape) / whole if whole else 1.0
            needed[operand] = needed.get(operand, 0.0) + times * share
    return {op.parameter: needed.get(op.name, 0.0) for op in body
            if op.opcode == "parameter" and op.parameter is not None}


_WHILE = re.compile(r"\bcondition=%?([\w.\-]+).*?\bbody=%?([\w.\-]+)")


def _loop_conditions(hlo_text: str) -> dict[str, tuple[str, str]]:
    """{a while loop's condition: (its body, the computation the loop is in)}."""
    computations, _ = _parse(hlo_text)
    out = {}
    for name, ops in computations.items():
        for op in ops:
            found = _WHILE.search(op.tail) if op.opcode == "while" else None
            if found:
                out[found.group(1)] = (found.group(2), name)
    return out


def op_bounds(hlo_text: str) -> dict[str, float]:
    """{instruction: the most bytes it can move}, for every scheduled instruction (outside fusion
    bodies): its operands' and results' bytes as laid out, where a gather or dynamic-slice reads
    only its slices, and a fusion reads each operand once per use (_fusion_operand_reads)."""
    computations, fused = _parse(hlo_text)
    bounds: dict[str, float] = {}
    for computation, ops in computations.items():
        if computation in fused:
            continue
        shapes = {op.name: op.shape for op in ops}
        for op in ops:
            if op.opcode in _NO_BYTES:
                continue
            result = shape_bytes(op.shape)
            operands = [shape_bytes(shapes.get(name, "")) for name in op.operands]
            if op.opcode in _SLICING and operands:
                operands[0] = result           # the slices it reads
            elif op.opcode == "fusion":
                called = _CALLS.search(op.tail)
                reads = _fusion_operand_reads(computations.get(called.group(1), [])) if called else {}
                operands = [b * reads.get(i, 1.0) for i, b in enumerate(operands)]
            bounds[op.name] = result + sum(operands)
    return bounds


@dataclasses.dataclass
class ByteBound:
    bytes: float | None   # the most the program's ops can move; None where it cannot be bounded
    why: str | None = None


def program_bound(hlo_text: str, loops: hlo_loops.ModuleLoops | None = None) -> ByteBound:
    """The most bytes the module's ops can move, each op counted on every trip of the loops around
    it; no bound where an op sits in a loop without a static trip count (how XLA's model counts it
    is not known), where the module has a Mosaic kernel (its grid may read an operand many times),
    or where it has no op."""
    loops = loops if loops is not None else hlo_loops.module_loops(hlo_text)
    mosaic = _MOSAIC.search(hlo_text)
    if mosaic:
        # A Mosaic kernel's grid may fetch an operand's blocks many times over (XLA's own ragged-dot
        # kernel in megablox_gmm's reference is charged 134 MB beyond its operands and result, the
        # weights read again for every group): no bound is known for it.
        return ByteBound(None, f"Mosaic kernel {mosaic.group(1)} may read its operands more than once")
    bounds = op_bounds(hlo_text)
    if not bounds:
        return ByteBound(None, "no scheduled op in the module")
    conditions = _loop_conditions(hlo_text)
    total = 0.0
    for name, bound in bounds.items():
        runs = loops.runs_of_instruction(name)
        computation = loops.computation_of.get(name)
        if runs is None and computation in conditions:
            # a loop's condition runs once a trip and once more to end it
            body, parent = conditions[computation]
            trips, outer = loops.runs.get(body), loops.runs.get(parent)
            runs = trips + outer if trips is not None and outer is not None else None
        if runs is None:
            return ByteBound(None, f"{name} runs a number of times known only at run time")
        total += runs * bound
    return ByteBound(total)
