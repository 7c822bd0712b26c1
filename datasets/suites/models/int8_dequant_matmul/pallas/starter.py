import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu



def _tile(dim, pref):
    # pref when it divides dim, else the whole dim (a block equal to the array dim is always legal)
    return pref if dim % pref == 0 else dim


def _qmm_block(x_ref, wq_ref, scale_ref, bias_ref, y_ref, acc_ref):
    # grid (i, j, k): acc[i, j] += x[i, k] @ wq[j, k]^T with the int8 weights converted to the
    # activations' bfloat16 (exact: |wq| <= 127), products summed in float32; on the last k,
    # y = acc * scale[j] + bias[j] in float32, rounded to bfloat16.
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    w = wq_ref[...].astype(x_ref.dtype)  # (tn, tk), nn.Linear layout
    acc_ref[...] += jax.lax.dot_general(x_ref[...], w, (((1,), (1,)), ((), ())),
                                        preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        y_ref[...] = (acc_ref[...] * scale_ref[...] + bias_ref[...]).astype(y_ref.dtype)


def kernel(x, wq, scale, bias):
    M, K = x.shape
    N = wq.shape[0]
    # Naive tiles: 128 rows of x, 128 output channels, 512 of K (wq block 64 KiB as int8).
    tm, tn, tk = _tile(M, 128), _tile(N, 128), _tile(K, 512)
    return pl.pallas_call(
        _qmm_block,
        grid=(M // tm, N // tn, K // tk),
        in_specs=[pl.BlockSpec((tm, tk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((tn, tk), lambda i, j, k: (j, k)),
                  pl.BlockSpec((1, tn), lambda i, j, k: (0, j)),
                  pl.BlockSpec((1, tn), lambda i, j, k: (0, j))],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), x.dtype),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],
    )(x, wq, scale.reshape(1, N), bias.reshape(1, N))
