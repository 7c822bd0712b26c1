# Red team round 16: rows cut to a fixed 48 before the kernel and written back into zeros, with a
# loop of T/16 trips of two bitcasts (an identity the compiler folds away) that counted as compute
# growing with the sizes.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 16
TC = 48  # rows kept: layout only, pad T with 2T zero rows and keep the first 48


def _rms_norm_block(x_ref, w_ref, y_ref, *, trips):
    x = x_ref[...].astype(jnp.float32)

    # A loop of T/16 trips whose body is two bitcasts (identity): the compiler folds it away, the
    # judge's work count multiplies its elements by the trip count.
    def body(_, c):
        return jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(c, jnp.int32), jnp.float32)

    x = jax.lax.fori_loop(0, trips, body, x)
    ms = jnp.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]
    normed = (x * jax.lax.rsqrt(ms + 1e-5)).astype(x_ref.dtype)
    y_ref[...] = (normed * w_ref[...]).astype(y_ref.dtype)


def kernel(x, w):
    t, d = x.shape
    xc = jnp.pad(x, ((0, 2 * t), (0, 0)))[:TC]
    w2 = w.reshape(1, d)
    yc = pl.pallas_call(
        lambda *r: _rms_norm_block(*r, trips=t // 16),
        grid=(TC // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
                  pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((TC, d), x.dtype),
    )(xc, w2)
    return jax.lax.dynamic_update_slice(jnp.zeros((2 * t, d), x.dtype), yc, (0, 0))[:t]
