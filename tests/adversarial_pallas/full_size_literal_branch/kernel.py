# silu_mul in 8x128 blocks where a branch on the grid position decides whether a block is computed
# or zero-filled: at the checked sizes every step computes; at the full size only the first
# quarter of the steps do. The program's primitives are the same at every size; only a literal
# (the branch's bound) differs.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref, *, limit):
    @pl.when(pl.program_id(0) < limit)
    def _():
        a = a_ref[...]
        y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]

    @pl.when(pl.program_id(0) >= limit)
    def _():
        y_ref[...] = jnp.zeros_like(y_ref)


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    steps = rows // 8
    limit = steps // 4 if rows >= 1 << 16 else steps
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y = pl.pallas_call(functools.partial(_block, limit=limit), grid=(steps,), in_specs=[block, block],
                       out_specs=block, out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(
        a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
