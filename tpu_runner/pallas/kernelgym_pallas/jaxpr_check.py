"""What a traced program does outside Pallas: the judge's structure check, run on the very
programs it then compiles and runs (artifact.py).

The task asks for a Pallas kernel. A candidate that returns the answer from plain jnp ops, or a
token pallas_call next to XLA doing the work, would be XLA timed against XLA. Rules, for the
program of every size set:

* at least one pallas_call, and every pallas_call a Mosaic kernel: no `interpret` flag of the
  candidate's own (Pallas lowers an interpreted kernel into plain XLA on every platform; the judge
  sets interpret mode itself where it wants it);
* no `platform_index` (lax.platform_dependent): the judge runs the program on the CPU and compiles
  it for the TPU, and a program that branches on the platform would be two programs;
* heavy work (contractions, convolutions, reductions, sorts, gathers, scans, cumulative ops)
  outside Pallas on at most 1% of the largest input's elements, counted with the trip counts of
  the loops around it (a matmul split into small blocks inside lax.map is as heavy as the
  matmul); inside a while loop, whose trip count the program does not say, none at all;
* arithmetic outside Pallas (elementwise math, not layout) on at most `ELEMENTWISE_BUDGET` times
  the largest input's elements (one pass), loops counted the same way: layout work (reshape,
  transpose, pad, slice, concatenate, casts, iota) is free, and so is a little glue (a scale),
  but an elementwise task's computation done by XLA is refused. Only work on values that depend
  on the inputs counts (masks and index tables built from iotas are folded by XLA). Scalars are free (loop counters,
  indices).

`skeleton` gives the shape-free structure of a program (its primitives, in order, with the bodies
of its kernels and loops, repeats counted once): the judge requires the same skeleton at every
size set, so the program compiled at the full sizes is the one whose answers were checked at the
small ones, up to its shapes, its constants and how often it repeats a step.
"""
from __future__ import annotations

import math

from . import artifact

# `reduce`: lax.reduce with a computation jax does not name (a sum written as max(a + b, a + b)),
# whose own equations are scalars: counted as the reduction it is (red team 28).
HEAVY_PRIMITIVES = {"dot_general", "conv_general_dilated", "reduce", "reduce_sum", "reduce_max", "reduce_min",
                    "reduce_prod", "reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin", "sort", "top_k",
                    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
                    "reduce_precision", "fft", "custom_linear_solve", "triangular_solve",
                    "cholesky", "lu", "qr", "eigh", "svd", "scatter-add", "scatter_add", "scatter", "scatter_mul",
                    "scatter_min", "scatter_max", "gather", "select_and_scatter_add", "reduce_window_sum",
                    "reduce_window", "reduce_window_max", "reduce_window_min", "ragged_dot_general",
                    "ragged_dot", "dynamic_gather"}
# Moving and viewing data, not computing on it: free outside Pallas.
LAYOUT_PRIMITIVES = {"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims",
                     "convert_element_type", "bitcast_convert_type", "slice", "dynamic_slice",
                     "dynamic_update_slice", "concatenate", "pad", "rev", "copy", "copy_p", "iota",
                     "split", "device_put", "sharding_constraint", "optimization_barrier", "name",
                     "squeeze_p", "full", "zeros_like", "broadcast", "stack"}
# Calls and control flow: walked into, not counted themselves.
STRUCTURE_PRIMITIVES = {"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                        "custom_vjp_call_jaxpr", "custom_jvp_call_jaxpr", "remat2", "checkpoint", "cond",
                        "while", "scan", "run_state"}
REFUSED_PRIMITIVES = {"platform_index": "lax.platform_dependent: the program would differ between the "
                                       "platform it is checked on (CPU) and the one it is compiled for (TPU)"}
# Arithmetic outside Pallas, in passes over the largest input (see the module's docstring).
ELEMENTWISE_BUDGET = 1.0
HEAVY_FRACTION = 0.01


def subjaxprs(eqn):
    """The jaxprs an equation holds in its parameters (bodies of pallas_call, cond, scan, ...)."""
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):  # ClosedJaxpr
                yield item.jaxpr
            elif hasattr(item, "eqns"):  # Jaxpr
                yield item


def _elements(var) -> int:
    shape = getattr(getattr(var, "aval", None), "shape", ())
    count = 1
    for d in shape:
        count *= int(d)
    return count


class Report:
    """What the structure check found in one program."""

    def __init__(self):
        self.pallas_calls = 0
        self.refusals: list[tuple[str, int]] = []  # (message, candidate line)
        self.heavy: list[tuple[str, int, float]] = []  # (primitive, candidate line, elements x trips)
        self.elementwise = 0.0  # elements of arithmetic outside Pallas, loops counted
        self.elementwise_line = 0  # the candidate line of the largest contribution
        self._largest_contribution = 0.0


def check(closed_jaxpr, largest_input: int) -> Report:
    """The structure check of one program (see the module's docstring). Only work on values that
    depend on the inputs counts: arithmetic on constants and iotas (masks, index tables) is
    folded by XLA and free."""
    report = Report()
    limit = max(1, largest_input * HEAVY_FRACTION)

    def walk(jaxpr, trips: float, tainted: set, outer_line: int = 0):
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            line = artifact.candidate_line(eqn.source_info) or outer_line
            depends = any(not _is_literal(v) and v in tainted for v in eqn.invars)
            if depends:
                tainted.update(v for v in eqn.outvars if not _is_drop(v))
            if name in REFUSED_PRIMITIVES:
                report.refusals.append((f"`{name}`: {REFUSED_PRIMITIVES[name]}", line))
                continue
            if name == "pallas_call":
                report.pallas_calls += 1
                if eqn.params.get("interpret"):
                    report.refusals.append(("pallas_call(interpret=...): Pallas lowers an interpreted kernel into "
                                            "plain XLA operations, so no Mosaic kernel would be compiled or timed; "
                                            "the judge chooses interpret mode itself", line))
                for sub in subjaxprs(eqn):  # the kernel body: only what may never run anywhere
                    for refused in _refused_inside(sub):
                        report.refusals.append((f"`{refused}`: {REFUSED_PRIMITIVES[refused]}", line))
                grid_mapping = eqn.params.get("grid_mapping")
                for block_mapping in getattr(grid_mapping, "block_mappings", ()):
                    index_map = getattr(block_mapping, "index_map_jaxpr", None)
                    for refused in _refused_inside(getattr(index_map, "jaxpr", None)):
                        report.refusals.append((f"`{refused}`: {REFUSED_PRIMITIVES[refused]}", line))
                continue
            inner = trips
            if name == "scan":
                inner = trips * max(1, int(eqn.params.get("length", 1)))
            elif name == "while":
                inner = math.inf
            if depends and name in HEAVY_PRIMITIVES:
                size = max((_elements(v) for v in eqn.invars), default=0)
                if size > 0 and size * trips > limit:
                    report.heavy.append((name, line, size * trips))
            elif depends and name not in LAYOUT_PRIMITIVES and name not in STRUCTURE_PRIMITIVES:
                elements = max((_elements(v) for v in eqn.outvars), default=0)
                size = elements * trips if elements > 1 else 0  # scalars: loop counters, indices
                if size > 0:
                    report.elementwise += size
                    if size > report._largest_contribution:
                        report._largest_contribution = size
                        report.elementwise_line = line
            for sub in subjaxprs(eqn):
                # Inside a call or a loop, every input counts as the inputs' if any of the
                # equation's does (the positions differ per primitive; this errs towards counting).
                walk(sub, inner, set(sub.invars) | set(sub.constvars) if depends else set(), line)

    walk(closed_jaxpr.jaxpr, 1.0, set(closed_jaxpr.jaxpr.invars))
    return report


def _is_literal(var) -> bool:
    return type(var).__name__ == "Literal"


def _is_drop(var) -> bool:
    return type(var).__name__ == "DropVar"


def _refused_inside(jaxpr):
    if jaxpr is None:
        return
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in REFUSED_PRIMITIVES:
            yield eqn.primitive.name
        for sub in subjaxprs(eqn):
            yield from _refused_inside(sub)


def verdict(report: Report, largest_input: int, size_set: str) -> list[dict]:
    """The structure check's diagnostics for one program; empty when it passes."""
    diags = []

    def error(line, message):
        diags.append({"file": "candidate.py", "line": line, "column": 0, "severity": "error",
                      "message": f"[{size_set} sizes] {message}"})

    for message, line in report.refusals:
        error(line, message)
    if report.pallas_calls == 0:
        error(0, "no pallas_call in the traced program: the task asks for a Pallas kernel")
    for name, line, size in report.heavy:
        amount = "inside a loop of unknown trip count" if math.isinf(size) else f"on {int(size)} elements"
        error(line, f"`{name}` {amount} runs outside Pallas (as XLA); do it inside a kernel")
    budget = ELEMENTWISE_BUDGET * max(1, largest_input)
    if report.elementwise > budget:
        amount = "inside a loop of unknown trip count" if math.isinf(report.elementwise) else \
            f"{report.elementwise / max(1, largest_input):.1f} passes over the largest input"
        error(report.elementwise_line,
              f"arithmetic outside Pallas amounts to {amount} (glue may take {ELEMENTWISE_BUDGET:g}): the work "
              f"runs as XLA; do it inside a kernel")
    return diags


def skeleton(closed_jaxpr) -> tuple:
    """The program's structure without shapes or constants: primitive names in order, with the
    skeletons of the jaxprs inside each equation (kernel bodies, index maps, loop bodies). A run
    of repeats counts once (`_collapse`): a kernel may unroll a Python loop whose trip count
    follows the shapes (halo blocks, taps), and that is still one program."""

    def of(jaxpr):
        out = []
        for eqn in jaxpr.eqns:
            subs = [of(sub) for sub in subjaxprs(eqn)]
            if eqn.primitive.name == "pallas_call":
                grid_mapping = eqn.params.get("grid_mapping")
                subs += [of(bm.index_map_jaxpr.jaxpr) for bm in getattr(grid_mapping, "block_mappings", ())
                         if getattr(bm, "index_map_jaxpr", None) is not None]
            out.append((eqn.primitive.name, _collapse(subs)) if subs else eqn.primitive.name)
        return _collapse(out)

    return of(closed_jaxpr.jaxpr)


def _collapse(items, longest: int = 128) -> tuple:
    """`items` with every immediate repeat of a run of up to `longest` items removed:
    (a, b, a, b, a, b, c) -> (a, b, c)."""
    items = list(items)
    changed = True
    while changed:
        changed = False
        for k in range(1, min(longest, len(items) // 2) + 1):
            i = 0
            while i + 2 * k <= len(items):
                if items[i:i + k] == items[i + k:i + 2 * k]:
                    del items[i + k:i + 2 * k]
                    changed = True
                else:
                    i += 1
    return tuple(items)


def first_difference(a: tuple, b: tuple, path: str = "") -> str:
    """Where two skeletons part, in words."""
    for i, (x, y) in enumerate(zip(a, b)):
        name_x = x[0] if isinstance(x, tuple) else x
        name_y = y[0] if isinstance(y, tuple) else y
        if name_x != name_y:
            return f"{path}operation {i + 1} is `{name_x}` in one and `{name_y}` in the other"
        if x != y:
            subs_x = x[1] if isinstance(x, tuple) else ()
            subs_y = y[1] if isinstance(y, tuple) else ()
            for sx, sy in zip(subs_x, subs_y):
                if sx != sy:
                    return first_difference(sx, sy, f"{path}inside `{name_x}` (operation {i + 1}): ")
            return f"{path}`{name_x}` (operation {i + 1}) holds {len(subs_x)} and {len(subs_y)} bodies"
    return f"{path}one has {len(a)} operations and the other {len(b)}"


def pallas_call_lines(closed_jaxpr) -> list[tuple[str, int]]:
    """(kernel name, candidate line of its pallas_call) for every pallas_call: where a Mosaic
    error, raised while the judge lowers the program, belongs."""
    out = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                out.append((str(eqn.params.get("name") or _kernel_name(eqn)), artifact.candidate_line(eqn.source_info)))
                continue
            for sub in subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return out


def _kernel_name(eqn) -> str:
    info = getattr(eqn.params.get("jaxpr"), "debug_info", None)
    return str(getattr(info, "func_src_info", "") or "").split(" ")[0]


def set_interpret(closed_jaxpr, interpret):
    """The program with every pallas_call's `interpret` parameter set to `interpret` (False for
    the TPU compile, InterpretParams for the correctness runs): Pallas decides between Mosaic and
    its interpreter by that parameter, which the tracer filled in, so the judge overwrites it."""
    return set_pallas_params(closed_jaxpr, interpret=interpret)


def set_pallas_params(closed_jaxpr, **params):
    """The program with these parameters overwritten in every pallas_call, at any depth."""

    def walk(jaxpr):
        eqns = []
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                eqns.append(eqn.replace(params=dict(eqn.params, **params)))
            else:
                eqns.append(eqn.replace(params={k: _map_jaxprs(v, walk) for k, v in eqn.params.items()}))
        return jaxpr.replace(eqns=eqns)

    return closed_jaxpr.replace(jaxpr=walk(closed_jaxpr.jaxpr))


def _map_jaxprs(value, fn):
    if hasattr(value, "jaxpr") and hasattr(value, "consts") and hasattr(value, "replace"):  # ClosedJaxpr
        return value.replace(jaxpr=fn(value.jaxpr))
    if hasattr(value, "eqns") and hasattr(value, "replace"):  # Jaxpr
        return fn(value)
    if type(value) is tuple:  # not NamedTuples: those are parameters, not lists of jaxprs
        return tuple(_map_jaxprs(v, fn) for v in value)
    if type(value) is list:
        return [_map_jaxprs(v, fn) for v in value]
    return value


def _bytes(aval) -> int:
    inner = getattr(aval, "inner_aval", aval)
    shape = getattr(inner, "shape", None)
    dtype = getattr(inner, "dtype", None)
    if shape is None or dtype is None:
        return 0  # semaphores and the like
    count = 1
    for d in shape:
        count *= int(d)
    return count * dtype.itemsize


def _in_vmem(aval) -> bool:
    space = str(getattr(aval, "memory_space", "")).lower()
    return not any(word in space for word in ("any", "hbm", "smem", "semaphore"))


def vmem_estimate(closed_jaxpr) -> int:
    """Bytes of VMEM the largest pallas_call asks for: its blocks twice (Pallas double-buffers
    the pipeline) plus its VMEM scratch. An estimate from the program, not Mosaic's allocation."""
    largest = 0

    def walk(jaxpr):
        nonlocal largest
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                mapping = eqn.params.get("grid_mapping")
                if mapping is None:
                    continue
                total = sum(2 * _bytes(bm.transformed_block_aval) for bm in mapping.block_mappings
                            if _in_vmem(bm.transformed_block_aval))
                total += sum(_bytes(a) for a in mapping.scratch_avals if _in_vmem(a))
                largest = max(largest, total)
                continue
            for sub in subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return largest


def uncovered_outputs(closed_jaxpr, max_grid_points: int = 1 << 21) -> list[str]:
    """Outputs that a pallas_call's grid leaves partly unwritten, one message each. Off a TPU the
    full-size program is compiled and estimated but never run, so a program that is right at the
    checked sizes and skips blocks only at the full size would be paid for work it never does.
    Each output's index map is evaluated over the whole grid (the map is the program's own, a few
    integer ops); the distinct blocks it names must be every block of the output. Outputs whose
    blocks are not plain tiles (element offsets, slices, data-dependent maps from scalar
    prefetch, whole arrays in HBM written by DMA) are not judged here; a grid with no steps writes
    nothing."""
    problems: list[str] = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                problems.extend(_coverage_problems(eqn, max_grid_points))
                continue
            for sub in subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return problems


def _tile_sizes(block_mapping) -> list[int] | None:
    from jax._src.pallas import core as pallas_core
    sizes = []
    for dim in block_mapping.block_shape:
        if dim is None or isinstance(dim, pallas_core.Squeezed):
            sizes.append(1)
        elif isinstance(dim, pallas_core.Blocked):
            sizes.append(int(dim.block_size))
        elif isinstance(dim, int):
            sizes.append(dim)
        else:
            return None  # element offsets or bounded slices: the map does not name tiles
    return sizes


def _coverage_problems(eqn, max_grid_points: int) -> list[str]:
    import math
    import jax
    import numpy as np
    from jax._src import core as jax_core
    mapping = eqn.params.get("grid_mapping")
    if mapping is None or mapping.num_index_operands:
        return []
    grid = tuple(mapping.grid)
    if not grid or any(not isinstance(g, int) for g in grid):
        return []
    points = math.prod(grid)
    if points == 0:
        return [f"pallas_call '{_kernel_name(eqn)}': its grid {grid} has no steps at the full sizes: none of its "
                f"outputs' blocks are ever written"]
    if points > max_grid_points:
        return []
    indices = [jax.numpy.asarray(axis.reshape(-1)) for axis in np.indices(grid, dtype=np.int32)]
    problems = []
    for k in range(mapping.num_outputs):
        block = mapping.block_mappings[mapping.num_inputs + k]
        sizes = _tile_sizes(block)
        shape = tuple(int(d) for d in block.array_aval.shape)
        # An output aliased to an input is judged like any other: the blocks the grid skips would
        # hold the input's values, which no check at the full size compares.
        if sizes is None or len(sizes) != len(shape) or not _in_vmem(block.transformed_block_aval):
            continue
        index_map = jax_core.jaxpr_as_fun(block.index_map_jaxpr)
        named = np.stack([np.asarray(b).reshape(-1) for b in jax.vmap(index_map)(*indices)], axis=1)
        counts = [math.ceil(d / s) for d, s in zip(shape, sizes)]
        inside = np.all((named >= 0) & (named < np.asarray(counts)), axis=1)
        # Distinct blocks by their row-major numbers (np.unique over rows sorts a structured view:
        # 0.1 s for gemm's 114,688 steps, against milliseconds for one number per block).
        written = len(np.unique(np.ravel_multi_index(tuple(named[inside].T), counts))) if counts else int(inside.any())
        needed = math.prod(counts)
        if written < needed:
            problems.append(f"pallas_call '{_kernel_name(eqn)}': its grid {grid} writes {written} of the {needed} "
                            f"blocks of output {k} (shape {shape}, blocks {tuple(sizes)}) at the full sizes; the "
                            f"others are never written")
    return problems
