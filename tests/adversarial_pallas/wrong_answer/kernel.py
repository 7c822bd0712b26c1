# Off by 1e-3 everywhere: a plain wrong answer, for the mismatch report.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...] + 1e-3  # off by 1e-3: the mismatch report must say where


def kernel(a, b):
    # Viewed as rows of 128 lanes; one grid step per block of 8 rows (the smallest float32 tile).
    n = a.shape[0]
    rows = n // 128
    a2, b2 = a.reshape(rows, 128), b.reshape(rows, 128)
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(
        _silu_mul_block,
        grid=(rows // 8,),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
    )(a2, b2)
    return y2.reshape(n)
