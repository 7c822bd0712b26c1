# RMSNorm whose input index map reads block i * (1 - flag), flag = (i >= 2) * (i != 2) formed by
# arithmetic from two decisions on the grid position. Each decision alone goes both ways on the
# checked grids (2 and 3 row steps: i >= 2 is true at i = 2, i != 2 true at i = 0, 1), but their
# product is 1 only from i = 3: on no checked step, and on every full-size step past the third,
# where every step reads block 0 (the pipeline stops fetching x) and writes the wrong rows.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 16


def _flag(i):
    return (i >= 2).astype(jnp.int32) * (i != 2).astype(jnp.int32)


def _body(x_ref, w_ref, y_ref):
    x = x_ref[...].astype(jnp.float32)
    mean_square = jnp.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]
    y_ref[...] = ((x * jax.lax.rsqrt(mean_square + 1e-5)).astype(x_ref.dtype) * w_ref[...]).astype(y_ref.dtype)


def kernel(x, w):
    t, d = x.shape
    return pl.pallas_call(
        _body, grid=(t // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, d), lambda i: (i * (1 - _flag(i)), 0)),
                  pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((t, d), x.dtype),
    )(x, w.reshape(1, d))
