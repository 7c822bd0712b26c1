import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive ragged dot. The output is tiled into (BM rows, BN columns) blocks; for each block a grid
# axis walks over all G groups, and a group whose row range [start_g, end_g) meets the block's
# rows adds lhs_block @ rhs[g] on those rows (a row mask), so each row gets exactly its group's
# product. Groups that miss the block are skipped; the rhs index map clamps g to the block's
# first..last overlapping group so that a skipped step re-uses the previous rhs block (no DMA).
# The whole K dimension is in each block (2 MiB lhs + 2 MiB rhs blocks at the full K=4096).
BM = 128
BN = 128


def _ragged_block(starts_ref, ends_ref, first_ref, last_ref, lhs_ref, rhs_ref, out_ref):
    i, g = pl.program_id(0), pl.program_id(2)
    bm = out_ref.shape[0]
    row0 = i * bm

    @pl.when(g == 0)
    def _():
        out_ref[...] = jnp.zeros_like(out_ref)

    start, end = starts_ref[g], ends_ref[g]

    @pl.when((start < row0 + bm) & (end > row0) & (start < end))
    def _():
        prod = jnp.dot(lhs_ref[...], rhs_ref[...], preferred_element_type=jnp.float32)
        rows = row0 + jax.lax.broadcasted_iota(jnp.int32, prod.shape, 0)
        mine = (rows >= start) & (rows < end)
        # each row gets one group's product: adding it to the zeros rounds once, in the output's dtype
        out_ref[...] = (out_ref[...].astype(jnp.float32) + jnp.where(mine, prod, 0.0)).astype(out_ref.dtype)


def kernel(lhs, rhs, group_sizes):
    m, k = lhs.shape
    g_count, _, n = rhs.shape
    bm, bn = min(m, BM), min(n, BN)
    assert m % bm == 0 and n % bn == 0, (m, n)
    tiles = m // bm

    # Per-group row ranges and per-row-tile overlapping group range: index bookkeeping on
    # G- and (M/BM x G)-sized int arrays, a negligible amount of work next to the matmul.
    sizes = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(sizes).astype(jnp.int32)
    starts = (ends - sizes).astype(jnp.int32)
    tile_lo = (jnp.arange(tiles, dtype=jnp.int32) * bm)[:, None]
    first = jnp.sum((ends[None, :] <= tile_lo).astype(jnp.int32), axis=1)            # groups ending before the tile
    last = jnp.sum((starts[None, :] < tile_lo + bm).astype(jnp.int32), axis=1) - 1  # last group starting inside
    first = jnp.minimum(first, g_count - 1).astype(jnp.int32)
    last = jnp.maximum(last, first).astype(jnp.int32)

    def rhs_map(i, j, g, starts_ref, ends_ref, first_ref, last_ref):
        return (jnp.minimum(jnp.maximum(g, first_ref[i]), last_ref[i]), 0, j)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=4,
        grid=(tiles, n // bn, g_count),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j, g, *refs: (i, 0)),
                  pl.BlockSpec((None, k, bn), rhs_map)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, g, *refs: (i, j)),
    )
    return pl.pallas_call(
        _ragged_block,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
    )(starts, ends, first, last, lhs, rhs)
