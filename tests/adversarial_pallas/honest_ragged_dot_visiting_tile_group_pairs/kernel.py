BN = "n128"
VISIT = "pairs"
# The starter's ragged dot with its decisions as knobs (pallas.json "knobs"; an episode's `knobs`
# action prepends one `NAME = value` line per knob).
#   VISIT  which (row tile, group) pairs the grid walks: "groups" every group for every row tile
#          (the starter's grid (M/BM, N/BN, G): G steps a tile, most of them skipped by a
#          data-dependent branch, which the estimate prices as run) | "pairs" only the pairs that
#          meet, from a work list the wrapper builds from group_sizes and scalar-prefetches (as
#          megablox's gmm): grid (N/BN, L), pair axis innermost, so consecutive pairs of one
#          tile accumulate in one float32 tile and a group's rhs block is fetched again only
#          when the group changes. A row tile and a group meet in at most M/BM + G - 1 pairs; L
#          is 9 G, a monomial of the sizes that bounds that at every size set (M/BM = 2, 3 and 64
#          against G = 12, 21 and 8), so the full-size grid is proven the checked one; at sizes
#          where it does not bound it (never in this task), L is the exact bound. The steps past
#          the work list repeat its last pair's blocks (no copy) and compute nothing.
#   BN     the output tile's width: "n128" 128 columns (the starter's) | "n8" N/8 (1792 at the
#          full size): 8 times fewer steps, each a larger matmul and a larger rhs block.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM = 128
BN_STARTER = 128
PAIRS_PER_GROUP = 9


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


def _pairs_block(tile_ref, group_ref, flags_ref, starts_ref, ends_ref, lhs_ref, rhs_ref, out_ref, acc_ref):
    # Step (j, p): pair p of the work list, row tile tile_ref[p] and group group_ref[p]. flags:
    # bit 0 the pair is real, bit 1 it is its tile's first, bit 2 its tile's last.
    p = pl.program_id(1)
    bm = out_ref.shape[0]
    flags = flags_ref[p]

    @pl.when((flags & 2) != 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when((flags & 1) != 0)
    def _():
        g = group_ref[p]
        start, end = starts_ref[g], ends_ref[g]
        prod = jnp.dot(lhs_ref[...], rhs_ref[...], preferred_element_type=jnp.float32)
        rows = tile_ref[p] * bm + jax.lax.broadcasted_iota(jnp.int32, prod.shape, 0)
        acc_ref[...] += jnp.where((rows >= start) & (rows < end), prod, 0.0)

    @pl.when((flags & 4) != 0)
    def _():
        out_ref[...] = acc_ref[...].astype(out_ref.dtype)


def _work_list(starts, ends, tiles, bm, g_count, length):
    # Every (tile, group) pair whose rows meet, tile-major, scattered to its rank among them in
    # `length` slots, with its flags (a tile's first and last meeting pair: the first and last
    # meeting group of its row); the slots after them repeat the last pair with no flags. No
    # array's size is a sum of sizes (the full-size program must follow the checked one as a
    # monomial of the sizes). Integer glue on (M/BM x G)- and L-sized arrays.
    tile_lo = jnp.arange(tiles, dtype=jnp.int32)[:, None] * bm
    meets = (starts[None, :] < tile_lo + bm) & (ends[None, :] > tile_lo) & (starts < ends)[None, :]
    seen = jnp.cumsum(meets.astype(jnp.int32), axis=1)                  # meeting groups so far, per tile
    per_tile = jnp.sum(meets.astype(jnp.int32), axis=1, keepdims=True)
    flags = (1 | ((seen == 1).astype(jnp.int32) << 1) | ((seen == per_tile).astype(jnp.int32) << 2)).reshape(-1)
    meets = meets.reshape(-1)
    rank = jnp.cumsum(meets.astype(jnp.int32)) - 1
    count = rank[-1] + 1
    slot_of = jnp.where(meets, rank, length)                            # past the end: dropped

    def packed(values):
        return jnp.zeros((length,), jnp.int32).at[slot_of].set(values.reshape(-1), mode="drop")

    tile = packed(jax.lax.broadcasted_iota(jnp.int32, (tiles, g_count), 0))
    group = packed(jax.lax.broadcasted_iota(jnp.int32, (tiles, g_count), 1))
    real = jnp.arange(length, dtype=jnp.int32) < count
    return jnp.where(real, tile, tile[count - 1]), jnp.where(real, group, group[count - 1]), packed(flags)


def kernel(lhs, rhs, group_sizes):
    m, k = lhs.shape
    g_count, _, n = rhs.shape
    bm = min(m, BM)
    bn = min(n, BN_STARTER) if BN == "n128" else n // 8
    assert m % bm == 0 and n % bn == 0, (m, n)
    tiles = m // bm

    sizes = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(sizes).astype(jnp.int32)
    starts = (ends - sizes).astype(jnp.int32)

    if VISIT == "pairs":
        length = PAIRS_PER_GROUP * g_count
        if length < tiles + g_count - 1:
            length = tiles + g_count - 1
        tile, group, flags = _work_list(starts, ends, tiles, bm, g_count, length)
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=5,
            grid=(n // bn, length),
            in_specs=[pl.BlockSpec((bm, k), lambda j, p, t, gr, *_: (t[p], 0)),
                      pl.BlockSpec((None, k, bn), lambda j, p, t, gr, *_: (gr[p], 0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda j, p, t, gr, *_: (t[p], j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        )
        return pl.pallas_call(
            _pairs_block,
            grid_spec=grid_spec,
            out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                                 vmem_limit_bytes=64 * 1024 * 1024),
        )(tile, group, flags, starts, ends, lhs, rhs)

    # Per-group row ranges and per-row-tile overlapping group range: index bookkeeping on
    # G- and (M/BM x G)-sized int arrays, a negligible amount of work next to the matmul.
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
    extra = {} if BN == "n128" else {"compiler_params": pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024)}
    return pl.pallas_call(
        _ragged_block,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
        **extra,
    )(starts, ends, first, last, lhs, rhs)
