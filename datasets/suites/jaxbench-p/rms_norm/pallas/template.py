# The starter's row-blocked RMSNorm with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob). Rows per step must divide every size
# set's T (32, 48, 32768), so 8 or 16; a block always holds whole rows (D).
#   ROWS     rows per grid step (16: the bfloat16 sublane tile, the starter's; or 8)
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


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
