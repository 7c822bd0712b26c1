# Sorts inside the kernel: Mosaic has no TPU lowering for sort, and says so on the pallas_call line.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = (jnp.sort(a, axis=-1) * b_ref[...])


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(
        _silu_mul_block,
        grid=(rows // 8,),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
    )(a.reshape(rows, 128), b.reshape(rows, 128))
    return y2.reshape(n)
