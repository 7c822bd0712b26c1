import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 16  # rows per grid step: the smallest bfloat16 sublane tile (16 x 128); a whole row (D) per block


def _rms_norm_block(x_ref, w_ref, y_ref):
    x = x_ref[...].astype(jnp.float32)                 # (ROWS, D), statistics in float32
    ms = jnp.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]
    normed = (x * jax.lax.rsqrt(ms + 1e-5)).astype(x_ref.dtype)
    y_ref[...] = (normed * w_ref[...]).astype(y_ref.dtype)


def kernel(x, w):
    t, d = x.shape
    w2 = w.reshape(1, d)  # 2D for Mosaic; the block is the whole (1, D) array
    return pl.pallas_call(
        _rms_norm_block,
        grid=(t // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
                  pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((t, d), x.dtype),
    )(x, w2)
