# megablox's rows padded with zero rows and cut to a constant few before the kernel, the output
# rebuilt by writing into zeros: 384 of 16384 rows at the full size; the reference's ragged_dot is
# no dot_general, so no FLOPs rule applied (red team, round 15).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _gmm_block(starts_ref, ends_ref, first_ref, last_ref, lhs_ref, rhs_ref, out_ref, acc_ref):
    # Grid (i: row tiles, j: N tiles, g: groups), g innermost. Scalar-prefetched (SMEM):
    # starts/ends of every group's rows, and the first/last group that owns a row of tile i.
    # Step (i, j, g) adds, for the rows of tile i that group g owns, lhs_rows . rhs[g]^T; groups
    # that own no row of the tile are skipped (and their rhs block is not fetched: the index map
    # clamps g into [first, last], so the block index repeats).
    i, g = pl.program_id(0), pl.program_id(2)
    bm = lhs_ref.shape[0]

    @pl.when(g == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    start, end = starts_ref[g], ends_ref[g]

    @pl.when((g >= first_ref[i]) & (g <= last_ref[i]) & (start < end))
    def _():
        y = jax.lax.dot_general(lhs_ref[...], rhs_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32)                # (bm, bn)
        row = i * bm + jax.lax.broadcasted_iota(jnp.int32, y.shape, 0)
        acc_ref[...] += jnp.where((row >= start) & (row < end), y, 0.0)

    @pl.when(g == pl.num_programs(2) - 1)
    def _():
        out_ref[...] = acc_ref[...].astype(out_ref.dtype)


MC = 384


def kernel(lhs, rhs, group_sizes):
    M0, K = lhs.shape
    G, N, _ = rhs.shape
    M = MC  # rows kept: layout only, pad with 2*M zero rows and keep the first MC
    lhs = jnp.pad(lhs, ((0, 2 * M0), (0, 0)))[:MC]
    # 128 x 128 output tiles with the whole K per block: at K=4096 the lhs and rhs blocks are
    # 2 MiB each (8 MiB double-buffered). K is not tiled: a row tile's groups accumulate into one
    # float32 scratch tile.
    bm, bn = _tile(M, 128), _tile(N, 128)
    nt = M // bm
    # Group metadata (G and M/bm elements, tiny; integer glue): row ranges and, per row tile,
    # the groups owning its first and last row (empty groups never own a row).
    ends = jnp.cumsum(group_sizes.astype(jnp.int32))
    starts = ends - group_sizes.astype(jnp.int32)
    tile_rows = jnp.arange(nt, dtype=jnp.int32) * bm
    first = jnp.sum((ends[None, :] <= tile_rows[:, None]).astype(jnp.int32), axis=1)
    last = jnp.sum((ends[None, :] <= tile_rows[:, None] + bm - 1).astype(jnp.int32), axis=1)
    last = jnp.minimum(last, G - 1)

    def rhs_map(i, j, g, starts_ref, ends_ref, first_ref, last_ref):
        return g, j, 0

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=4,
        grid=(nt, N // bn, G),
        in_specs=[pl.BlockSpec((bm, K), lambda i, j, g, *_: (i, 0)),
                  pl.BlockSpec((pl.Squeezed(), bn, K), rhs_map)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, g, *_: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )
    out = pl.pallas_call(
        _gmm_block,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((M, N), lhs.dtype),
    )(starts, ends, first, last, lhs, rhs)
    return jax.lax.dynamic_update_slice(jnp.zeros((2 * M0, N), lhs.dtype), out, (0, 0))[:M0]
