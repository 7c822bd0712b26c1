# Two independent pallas_calls whose operands and results have the same bytes: silu_mul in 8x128
# blocks, and a busy kernel (64 rounds of sin per element, in 64x128 blocks) whose answer is
# multiplied by zero where a third kernel joins them. XLA is free to compile them in either order; the estimator paired compiled
# kernels with traced calls in program order, checked only by bytes, so a reordering gives each
# kernel the other's grid (the same two kernels were estimated 36 ms or 129 ms by their order).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def _busy(a_ref, b_ref, y_ref):
    y_ref[...] = jax.lax.fori_loop(0, 64, lambda t, v: jnp.sin(v) * 1.0001 + 0.5, a_ref[...] + b_ref[...])


def _keep_first(x_ref, z_ref, y_ref):
    y_ref[...] = x_ref[...] + z_ref[...] * 0.0


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    a2, b2 = a.reshape(rows, 128), b.reshape(rows, 128)
    out = jax.ShapeDtypeStruct((rows, 128), a.dtype)
    small = pl.BlockSpec((8, 128), lambda i: (i, 0))
    light = pl.pallas_call(_silu_mul, grid=(rows // 8,), in_specs=[small, small], out_specs=small,
                           out_shape=out)(a2, b2)
    large = pl.BlockSpec((64, 128), lambda i: (i, 0))
    busy = pl.pallas_call(_busy, grid=(rows // 64,), in_specs=[large, large], out_specs=large,
                          out_shape=out)(a2, b2)
    y = pl.pallas_call(_keep_first, grid=(rows // 64,), in_specs=[large, large], out_specs=large,
                       out_shape=out)(light, busy)
    return y.reshape(n)
