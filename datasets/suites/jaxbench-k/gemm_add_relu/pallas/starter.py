import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive tiled matmul with the bias + ReLU epilogue on the last k step.
# Tiles of 256 (or the whole dim when it is smaller / not a multiple): a 256x256 float32
# block is 256 KiB, so x, weight (double-buffered), the accumulator and the output stay
# around 1.5 MiB of VMEM.
TILE = 256


def _tile(dim, want=TILE):
    return want if dim % want == 0 else dim


def _gemm_bias_relu(x_ref, w_ref, b_ref, y_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # x tile [tm, tk] times weight tile [tn, tk] contracted over k: x @ weight.T
    acc_ref[...] += jax.lax.dot_general(
        x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
        preferred_element_type=jnp.float32, precision=jax.lax.Precision.HIGHEST)

    @pl.when(k == pl.num_programs(2) - 1)
    def _epilogue():
        y_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0).astype(y_ref.dtype)


def kernel(x, weight, bias):
    m, k = x.shape
    n = weight.shape[0]
    tm, tn, tk = _tile(m), _tile(n), _tile(k)
    b2 = bias.reshape(1, n)
    return pl.pallas_call(
        _gemm_bias_relu,
        grid=(m // tm, n // tn, k // tk),
        in_specs=[
            pl.BlockSpec((tm, tk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((tn, tk), lambda i, j, kk: (j, kk)),
            pl.BlockSpec((1, tn), lambda i, j, kk: (0, j)),
        ],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],
    )(x, weight, b2)
