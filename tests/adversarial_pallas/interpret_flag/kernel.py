# pallas_call(interpret=True) is lowered by Pallas's own interpreter into ordinary XLA operations
# (loops over the grid), on every platform: the "TPU compile" then compiles no Mosaic kernel at
# all, and what would be timed on a TPU is XLA. Its answer is right; it is not a Pallas kernel.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y = pl.pallas_call(_silu_mul_block, grid=(rows // 8,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
                       interpret=True)(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
