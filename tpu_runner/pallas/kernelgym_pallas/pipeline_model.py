"""A Pallas grid pipeline priced as it runs: the bytes its blocks move, step by step, and how much
of that overlaps with compute.

Pallas copies a step's input blocks into VMEM before the step and its output blocks back after it,
double-buffered: while step i computes, the inputs of step i+1 are fetched and the outputs of
step i-1 written back. A block whose index does not change from one step to the next is neither
fetched nor written again (a matmul's output block along the contraction, a weight block that is
the same at every step). Nothing overlaps the first step's fetch or the last step's write-back,
and a single-step grid overlaps nothing at all:

    time = first fetch + (steps - 1) x max(compute a step, bytes a step / bandwidth)
           + compute of the last step + last write-back

With one step this is fetch + compute + write-back, not the larger of the two.

A block given a single buffer (`pipeline_mode=pl.Buffered(1)`) has no second slot to fetch into
while a step computes: its next fetch waits for the step to finish with the buffer, and its
write-back must land before the next step writes it. Its steady copies are serial with compute:

    steady step = max(compute a step + single-buffered bytes a step / bandwidth,
                      double-buffered bytes a step / bandwidth)

(a single-buffered block whose index never changes is fetched once and costs nothing more).

The blocks each step copies come from evaluating every block's index map over the whole grid (in
the grid's order, the last axis fastest), as the pipeline does. Where that is not possible (a grid
larger than `MAX_GRID_POINTS`, index maps that read scalar-prefetch operands, a grid known only
at run time) every block is counted at every step: more bytes than the chip moves, a bias against
the kernel, never for it.
"""
from __future__ import annotations

import dataclasses
import math

MAX_GRID_POINTS = 1 << 20


@dataclasses.dataclass
class BlockTraffic:
    steps: int
    first_in: float = 0.0     # bytes fetched before the first step
    last_out: float = 0.0     # bytes written back after the last step
    total_in: float = 0.0     # bytes fetched over the whole grid
    total_out: float = 0.0    # bytes written back over the whole grid
    exact: bool = True        # False: every block counted at every step
    serial: float = 0.0       # bytes of single-buffered blocks after the first fetch / before the last write-back

    @property
    def total(self) -> float:
        return self.total_in + self.total_out

    def steady_bytes_per_step(self) -> float:
        """The bytes moved while a step computes (what is not the first fetch or last write-back)."""
        if self.steps <= 1:
            return 0.0
        return max(0.0, self.total - self.first_in - self.last_out - self.serial) / (self.steps - 1)

    def serial_bytes_per_step(self) -> float:
        """The bytes of single-buffered blocks each step moves with nothing to overlap them."""
        return self.serial / (self.steps - 1) if self.steps > 1 else 0.0


def _aval_bytes(aval) -> float:
    inner = getattr(aval, "inner_aval", aval)
    shape, dtype = getattr(inner, "shape", None), getattr(inner, "dtype", None)
    if shape is None or dtype is None:
        return 0.0
    return float(math.prod(int(d) for d in shape) * dtype.itemsize)


def _pipelined(block_mapping) -> bool:
    """A block the pipeline copies: in VMEM (not left in HBM/ANY for the kernel's own DMAs, not in
    SMEM, not a semaphore)."""
    block = getattr(block_mapping, "transformed_block_aval", None) or getattr(block_mapping, "block_aval", None)
    space = str(getattr(block, "memory_space", "")).lower()
    return not any(word in space for word in ("any", "hbm", "smem", "semaphore"))


def _single_buffered(block_mapping) -> bool:
    mode = getattr(block_mapping, "pipeline_mode", None)
    return getattr(mode, "buffer_count", 2) == 1


def _fetches(block_mapping, indices) -> int | None:
    """How many times the block is copied over the grid: once, plus once each time its index
    changes from one step to the next; None when the index map cannot be evaluated here."""
    import jax
    import numpy as np
    from jax._src import core as jax_core
    try:
        index_map = jax_core.jaxpr_as_fun(block_mapping.index_map_jaxpr)
        named = np.stack([np.asarray(b).reshape(-1) for b in jax.vmap(index_map)(*indices)], axis=1)
    except Exception:  # an index map this evaluation cannot run: counted at every step instead
        return None
    if len(named) == 0:
        return 0
    return 1 + int(np.count_nonzero(np.any(named[1:] != named[:-1], axis=1)))


def block_traffic(grid_mapping) -> BlockTraffic:
    """The pipeline's copies for one pallas_call's grid mapping."""
    grid = tuple(getattr(grid_mapping, "grid", ()) or ())
    static = all(isinstance(g, int) for g in grid)
    steps = math.prod(grid) if static else 1
    mappings = list(getattr(grid_mapping, "block_mappings", ()) or ())
    n_in = int(getattr(grid_mapping, "num_inputs", len(mappings)))
    evaluable = (static and 0 < steps <= MAX_GRID_POINTS and not getattr(grid_mapping, "num_index_operands", 0))
    indices = None
    if evaluable:
        import jax.numpy as jnp
        import numpy as np
        indices = [jnp.asarray(axis.reshape(-1)) for axis in np.indices(grid, dtype=np.int32)]
    traffic = BlockTraffic(steps)
    for k, bm in enumerate(mappings):
        if not _pipelined(bm):
            continue
        size = _aval_bytes(getattr(bm, "transformed_block_aval", None) or getattr(bm, "block_aval", None))
        fetches = _fetches(bm, indices) if indices is not None else None
        if fetches is None:
            traffic.exact = False
            fetches = steps
        if k < n_in:
            traffic.first_in += size
            traffic.total_in += size * fetches
        else:
            traffic.last_out += size
            traffic.total_out += size * fetches
        if _single_buffered(bm) and fetches:
            traffic.serial += size * (fetches - 1)
    return traffic


def pipeline_seconds(compute_seconds: float, traffic: BlockTraffic, bytes_per_s: float) -> float:
    """The grid's time: compute_seconds (all steps) overlapped with the copies as in the notes."""
    steps = max(1, traffic.steps)
    step = compute_seconds / steps
    steady = traffic.steady_bytes_per_step() / bytes_per_s
    serial = traffic.serial_bytes_per_step() / bytes_per_s
    return (traffic.first_in / bytes_per_s + (steps - 1) * max(step + serial, steady) + step
            + traffic.last_out / bytes_per_s)
