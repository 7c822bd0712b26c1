# The starter's fused residual add + RMSNorm with its decisions as knobs (pallas.json "knobs"; an
# episode's `knobs` action prepends one `NAME = value` line per knob). Rows per step must divide
# every size set's T (32, 48, 4096): 8 or 16, or a fixed fraction of T (T / 16: 2, 3 and 256 rows,
# a number that follows T in one way at every size set, so the full-size program is proven the
# checked one); a block always holds whole rows (D).
#   ROWS     rows per grid step: "r16" 16 (the bfloat16 sublane tile, the starter's), "r8" 8,
#            "t16" T / 16 (256 at the full size: 2 MiB blocks, 16 steps)
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _add_rms_block(x_ref, r_ref, w_ref, h_ref, y_ref, *, inv_d):
    # A block of whole rows: h = x + residual (rounded to the inputs' dtype), the mean of h^2 per row
    # in float32, normed = h * rsqrt(. + eps) rounded to the inputs' dtype, y = normed * w.
    h = (x_ref[...].astype(jnp.float32) + r_ref[...].astype(jnp.float32)).astype(h_ref.dtype)
    h_ref[...] = h
    hf = h.astype(jnp.float32)
    var = jnp.sum(hf * hf, axis=1, keepdims=True) * inv_d
    normed = (hf * jax.lax.rsqrt(var + 1e-5)).astype(y_ref.dtype)
    y_ref[...] = (normed.astype(jnp.float32) * w_ref[...].astype(jnp.float32)).astype(y_ref.dtype)


def kernel(x, residual, w):
    T, D = x.shape
    tt = {"r16": 16, "r8": 8, "t16": T // 16}[ROWS]
    row = pl.BlockSpec((tt, D), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_add_rms_block, inv_d=1.0 / D),
        grid=(T // tt,),
        in_specs=[row, row, pl.BlockSpec((1, D), lambda i: (0, 0))],
        out_specs=(row, row),
        out_shape=(jax.ShapeDtypeStruct((T, D), x.dtype), jax.ShapeDtypeStruct((T, D), x.dtype)),
        # T / 16 rows: four 2 MiB blocks, double-buffered, pass the default scoped limit
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024),
    )(x, residual, w.reshape(1, D))
