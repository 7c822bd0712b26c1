"""What the candidate's jaxpr does outside Pallas.

The task asks for a Pallas kernel. A candidate that returns the answer from plain jnp ops (or a
token pallas_call next to an XLA matmul) would be timed as XLA against XLA. Rule: the traced
program must contain at least one pallas_call, and the heavy work (contractions, convolutions,
reductions, sorts, scans, cumulative ops) must happen inside Pallas kernels. Layout work outside
(reshape, transpose, pad, slice, concatenate, casts, elementwise glue) stays allowed: real
kernels need it.
"""
from __future__ import annotations

HEAVY_PRIMITIVES = {"dot_general", "conv_general_dilated", "reduce_sum", "reduce_max", "reduce_min",
                    "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin", "sort", "top_k",
                    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
                    "reduce_precision", "fft", "custom_linear_solve", "triangular_solve",
                    "cholesky", "lu", "qr", "eigh", "svd", "scatter-add", "scatter_add", "scatter",
                    "gather", "select_and_scatter_add", "reduce_window_sum", "reduce_window"}


def _subjaxprs(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):  # ClosedJaxpr
                yield item.jaxpr
            elif hasattr(item, "eqns"):  # Jaxpr
                yield item


def _line_of(eqn, candidate_file: str) -> int:
    try:
        from jax._src import source_info_util
        for frame in source_info_util.user_frames(eqn.source_info.traceback):
            if frame.file_name == candidate_file:
                return frame.start_line
    except Exception:  # source info is best effort; the message still names the primitive
        pass
    return 0


def _elements(var) -> int:
    shape = getattr(getattr(var, "aval", None), "shape", ())
    count = 1
    for d in shape:
        count *= int(d)
    return count


def check(closed_jaxpr, candidate_file: str, largest_input: int) -> tuple[int, list[tuple[str, int, int]]]:
    """(number of pallas_calls, [(heavy primitive outside Pallas, candidate line, elements)])."""
    limit = max(1, largest_input // 100)
    pallas_calls = 0
    heavy: list[tuple[str, int, int]] = []

    def walk(jaxpr):
        nonlocal pallas_calls
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name == "pallas_call":
                pallas_calls += 1
                continue  # inside a kernel everything is allowed
            if name in HEAVY_PRIMITIVES:
                size = max((_elements(v) for v in eqn.invars), default=0)
                if size > limit:
                    heavy.append((name, _line_of(eqn, candidate_file), size))
            for sub in _subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return pallas_calls, heavy


def pallas_call_lines(closed_jaxpr, candidate_file: str) -> list[tuple[str, int]]:
    """(kernel name, candidate line of its pallas_call) for every pallas_call: where a Mosaic
    error, raised after tracing has left the candidate's frames, belongs."""
    out = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                out.append((str(eqn.params.get("name", "")), _line_of(eqn, candidate_file)))
                continue
            for sub in _subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return out


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
            for sub in _subjaxprs(eqn):
                walk(sub)

    walk(closed_jaxpr.jaxpr)
    return largest
