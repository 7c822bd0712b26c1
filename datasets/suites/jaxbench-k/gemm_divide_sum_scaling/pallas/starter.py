import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# The sum over n moves inside the product (as the task allows):
#   y[m] = 1.5 / 2 * sum_k x[m, k] * (sum_n weight[n, k]).
# Two naive passes:
#   1. wsum[k] = sum_n weight[n, k]          (grid K/tk x N/tn, N innermost, accumulating)
#   2. y[m] = 0.75 * sum_k x[m, k] * wsum[k]  (grid M/tm x K/tk, K innermost, accumulating)
# Tiles of 256 (or the whole dim when smaller / not a multiple): 256 KiB float32 blocks.
TILE = 256


def _tile(dim, want=TILE):
    return want if dim % want == 0 else dim


def _weight_colsum(w_ref, ws_ref, acc_ref):
    n = pl.program_id(1)

    @pl.when(n == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.sum(w_ref[...], axis=0, keepdims=True)

    @pl.when(n == pl.num_programs(1) - 1)
    def _store():
        ws_ref[...] = acc_ref[...]


def _rowdot(x_ref, ws_ref, y_ref, acc_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.sum(x_ref[...] * ws_ref[...], axis=1, keepdims=True)

    @pl.when(k == pl.num_programs(1) - 1)
    def _store():
        y_ref[...] = (acc_ref[...] * 0.75).astype(y_ref.dtype)


def kernel(x, weight):
    m, k = x.shape
    n = weight.shape[0]
    tm, tn, tk = _tile(m), _tile(n), _tile(k)
    f32 = jnp.float32

    wsum = pl.pallas_call(
        _weight_colsum,
        grid=(k // tk, n // tn),
        in_specs=[pl.BlockSpec((tn, tk), lambda kk, j: (j, kk))],
        out_specs=pl.BlockSpec((1, tk), lambda kk, j: (0, kk)),
        out_shape=jax.ShapeDtypeStruct((1, k), f32),
        scratch_shapes=[pltpu.VMEM((1, tk), f32)],
    )(weight)

    return pl.pallas_call(
        _rowdot,
        grid=(m // tm, k // tk),
        in_specs=[pl.BlockSpec((tm, tk), lambda i, kk: (i, kk)),
                  pl.BlockSpec((1, tk), lambda i, kk: (0, kk))],
        out_specs=pl.BlockSpec((tm, 1), lambda i, kk: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((tm, 1), f32)],
    )(x, wsum)
