# A K axis of a fixed 3 grid steps naming K block (i + j + k) mod (K/256): every K block is named
# somewhere on the grid at every size, and each output block sums 3 of its 2, 3 (checked) or 32 (full) K blocks.
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3  # fixed K steps; K blocks named diagonally (no table): (i + j + k) mod K-blocks


def _body(a_ref, b_ref, c_ref, acc_ref, *, kb):
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
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid=(M // bm, N // bn, KS),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, jax.lax.rem(i + j + k, kb))),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (jax.lax.rem(i + j + k, kb), j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )(A, B)
