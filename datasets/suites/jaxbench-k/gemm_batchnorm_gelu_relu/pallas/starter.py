import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Three naive passes:
#   1. tiled matmul h = x @ weight.T                      (grid M/tm x N/tn x K/tk)
#   2. per-column sum and sum of squares of h - ref over M (ref = the column's mean over the
#      first M tile, so E[d^2] - E[d]^2 in float32 keeps the variance even when a column's
#      mean is large next to its spread), turned into the column mean and
#      scale = bn_weight / sqrt(var + eps)                  (grid N/tn x M/tm, M innermost)
#   3. y = relu(gelu((h - mean) * scale + bn_bias))         (grid M/tm x N/tn)
# Tiles of 256 (or the whole dim when smaller / not a multiple): 256x256 float32 blocks are
# 256 KiB each, a few MiB of VMEM at most.
TILE = 256
EPS = 1e-5


def _tile(dim, want=TILE):
    return want if dim % want == 0 else dim


def _matmul(x_ref, w_ref, h_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jax.lax.dot_general(
        x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
        preferred_element_type=jnp.float32, precision=jax.lax.Precision.HIGHEST)

    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        h_ref[...] = acc_ref[...]


def _column_stats(m_total, h_ref, g_ref, mean_ref, scale_ref, ref_ref, sum_ref, sq_ref):
    i = pl.program_id(1)
    h = h_ref[...]

    @pl.when(i == 0)
    def _init():
        ref_ref[...] = jnp.mean(h, axis=0, keepdims=True)
        sum_ref[...] = jnp.zeros_like(sum_ref)
        sq_ref[...] = jnp.zeros_like(sq_ref)

    dev = h - ref_ref[...]
    sum_ref[...] += jnp.sum(dev, axis=0, keepdims=True)
    sq_ref[...] += jnp.sum(dev * dev, axis=0, keepdims=True)

    @pl.when(i == pl.num_programs(1) - 1)
    def _fold():
        dmean = sum_ref[...] / m_total
        var = jnp.maximum(sq_ref[...] / m_total - dmean * dmean, 0.0)  # biased variance
        mean_ref[...] = ref_ref[...] + dmean
        scale_ref[...] = g_ref[...] * jax.lax.rsqrt(var + EPS)


def _apply(h_ref, mean_ref, scale_ref, b_ref, y_ref):
    v = (h_ref[...] - mean_ref[...]) * scale_ref[...] + b_ref[...]
    g = 0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))
    y_ref[...] = jnp.maximum(g, 0.0).astype(y_ref.dtype)


def kernel(x, weight, bn_weight, bn_bias):
    m, k = x.shape
    n = weight.shape[0]
    tm, tn, tk = _tile(m), _tile(n), _tile(k)
    f32 = jnp.float32

    h = pl.pallas_call(
        _matmul,
        grid=(m // tm, n // tn, k // tk),
        in_specs=[pl.BlockSpec((tm, tk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((tn, tk), lambda i, j, kk: (j, kk))],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), f32),
        scratch_shapes=[pltpu.VMEM((tm, tn), f32)],
    )(x, weight)

    row = pl.BlockSpec((1, tn), lambda j, i: (0, j))
    mean, scale = pl.pallas_call(
        lambda *refs: _column_stats(float(m), *refs),
        grid=(n // tn, m // tm),
        in_specs=[pl.BlockSpec((tm, tn), lambda j, i: (i, j)), row],
        out_specs=[row, row],
        out_shape=[jax.ShapeDtypeStruct((1, n), f32)] * 2,
        scratch_shapes=[pltpu.VMEM((1, tn), f32)] * 3,
    )(h, bn_weight.reshape(1, n))

    col = pl.BlockSpec((1, tn), lambda i, j: (0, j))
    return pl.pallas_call(
        _apply,
        grid=(m // tm, n // tn),
        in_specs=[pl.BlockSpec((tm, tn), lambda i, j: (i, j)), col, col, col],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(h, mean, scale, bn_bias.reshape(1, n))
