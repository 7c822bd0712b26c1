import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Two naive passes:
#   1. tiled matmul with the column max fused in: grid N/tn x M/tm x K/tk (N outermost, so
#      each [1, tn] max accumulator stays resident while all M and K tiles pass); z = max + bias
#      (max_m(v + b[n]) = max_m(v) + b[n]). h itself is never written to HBM.
#   2. one block holding z [1, N]: subtract its mean, exact (erf) GELU.
# Tiles of 256 (256 KiB float32 blocks), about 1.5 MiB of VMEM.
TILE = 256


def _tile(dim, want=TILE):
    return want if dim % want == 0 else dim


def _matmul_colmax(x_ref, w_ref, b_ref, z_ref, acc_ref, max_ref):
    i = pl.program_id(1)
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jax.lax.dot_general(
        x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
        preferred_element_type=jnp.float32, precision=jax.lax.Precision.HIGHEST)

    last_k = k == pl.num_programs(2) - 1

    @pl.when(last_k)
    def _tile_max():
        tile_max = jnp.max(acc_ref[...], axis=0, keepdims=True)
        max_ref[...] = jnp.where(i == 0, tile_max, jnp.maximum(max_ref[...], tile_max))

    @pl.when(last_k & (i == pl.num_programs(1) - 1))
    def _store():
        z_ref[...] = max_ref[...] + b_ref[...]


def _center_gelu(z_ref, y_ref):
    z = z_ref[...]
    v = z - jnp.mean(z, axis=1, keepdims=True)
    y_ref[...] = (0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))).astype(y_ref.dtype)


def kernel(x, weight, bias):
    m, k = x.shape
    n = weight.shape[0]
    tm, tn, tk = _tile(m), _tile(n), _tile(k)
    f32 = jnp.float32

    z = pl.pallas_call(
        _matmul_colmax,
        grid=(n // tn, m // tm, k // tk),
        in_specs=[pl.BlockSpec((tm, tk), lambda j, i, kk: (i, kk)),
                  pl.BlockSpec((tn, tk), lambda j, i, kk: (j, kk)),
                  pl.BlockSpec((1, tn), lambda j, i, kk: (0, j))],
        out_specs=pl.BlockSpec((1, tn), lambda j, i, kk: (0, j)),
        out_shape=jax.ShapeDtypeStruct((1, n), f32),
        scratch_shapes=[pltpu.VMEM((tm, tn), f32), pltpu.VMEM((1, tn), f32)],
    )(x, weight, bias.reshape(1, n))

    whole = pl.BlockSpec((1, n), lambda r: (0, 0))
    return pl.pallas_call(
        _center_gelu,
        grid=(1,),
        in_specs=[whole],
        out_specs=whole,
        out_shape=jax.ShapeDtypeStruct((1, n), x.dtype),
    )(z)
