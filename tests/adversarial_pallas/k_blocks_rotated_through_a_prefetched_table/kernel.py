# k_blocks_rotated_by_the_output_block with the K block read from a scalar-prefetched table
# (t[(i + j + k) mod (K/256)] over an arange table).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3  # fixed K steps; K blocks named diagonally through a table so every block is named somewhere


def _body(t_ref, a_ref, b_ref, c_ref, acc_ref, *, kb):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < kb)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == KS - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256
    kb = K // bk
    t = jax.lax.rem(jnp.arange(2 * (N // bn), dtype=jnp.int32), jnp.int32(kb))  # t[x] = x mod (K blocks)
    import functools
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(M // bm, N // bn, KS),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k, t: (i, t[i + j + k])),
                      pl.BlockSpec((bk, bn), lambda i, j, k, t: (t[i + j + k], j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k, t: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
    )(t, A, B)
