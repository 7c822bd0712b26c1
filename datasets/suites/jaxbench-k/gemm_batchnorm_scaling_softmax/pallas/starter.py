import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Three naive passes:
#   1. tiled matmul h = x @ weight.T                         (grid M/tm x N/tn x K/tk)
#   2. per-column sum and sum of squares of h - ref over M (ref = the column's mean over the
#      first M tile, so E[d^2] - E[d]^2 in float32 keeps the variance even when a column's
#      mean is large next to its spread), turned into the column mean, a column scale
#      scale * bn_weight / sqrt(var + eps) and a column shift scale * bn_bias
#                                                             (grid N/tn x M/tm, M innermost)
#   3. row softmax of (h - mean) * col_scale + col_shift, one block of ROWS whole rows per step
# Matmul/statistics tiles of 256 (256 KiB float32 blocks). The softmax block holds whole rows:
# 64 x 8192 float32 = 2 MiB at the full shapes, ~8 MiB of VMEM with double-buffered in and out.
TILE = 256
ROWS = 64
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


def _column_stats(m_total, s_ref, h_ref, g_ref, b_ref, mean_ref, scale_ref, shift_ref,
                  ref_ref, sum_ref, sq_ref):
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
        s = s_ref[0]  # the module's shape-(1,) scale, from SMEM
        mean_ref[...] = ref_ref[...] + dmean
        scale_ref[...] = s * g_ref[...] * jax.lax.rsqrt(var + EPS)
        shift_ref[...] = s * b_ref[...]


def _softmax_rows(h_ref, mean_ref, scale_ref, shift_ref, y_ref):
    v = (h_ref[...] - mean_ref[...]) * scale_ref[...] + shift_ref[...]
    v = v - jnp.max(v, axis=1, keepdims=True)
    e = jnp.exp(v)
    y_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(y_ref.dtype)


def kernel(x, weight, bn_weight, bn_bias, scale):
    m, k = x.shape
    n = weight.shape[0]
    tm, tn, tk = _tile(m), _tile(n), _tile(k)
    tr = _tile(m, ROWS)
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
    col_mean, col_scale, col_shift = pl.pallas_call(
        lambda *refs: _column_stats(float(m), *refs),
        grid=(n // tn, m // tm),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec((tm, tn), lambda j, i: (i, j)), row, row],
        out_specs=[row, row, row],
        out_shape=[jax.ShapeDtypeStruct((1, n), f32)] * 3,
        scratch_shapes=[pltpu.VMEM((1, tn), f32)] * 3,
    )(scale, h, bn_weight.reshape(1, n), bn_bias.reshape(1, n))

    whole = pl.BlockSpec((1, n), lambda r: (0, 0))
    return pl.pallas_call(
        _softmax_rows,
        grid=(m // tr,),
        in_specs=[pl.BlockSpec((tr, n), lambda r: (r, 0)), whole, whole, whole],
        out_specs=pl.BlockSpec((tr, n), lambda r: (r, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(h, col_mean, col_scale, col_shift)
