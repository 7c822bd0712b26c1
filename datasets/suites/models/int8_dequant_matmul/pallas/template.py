# The starter's int8-weight matmul with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob). A block is either the starter's
# constant (it divides every size set) or half of its dimension: both follow the task's sizes in
# one way at every size set, so the full-size program is proven the checked one and its estimate
# is paid (docs/pallas.md). Halves give large tiles at the full size (M = 2048, N = 11008,
# K = 4096) while the checked sizes stay small.
#   TM  rows of x per step: "r128" 128 (the starter's) or "half" M / 2 (1024 at the full size)
#   TN  output channels per step: "c128" 128 (the starter's) or "half" N / 2 (5504)
#   TK  the contraction's step: "k512" 512 deep (the starter's) or "half" K / 2 (2048): fewer,
#       longer grid steps and larger DMAs
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


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
    tm = 128 if TM == "r128" else M // 2
    tn = 128 if TN == "c128" else N // 2
    tk = 512 if TK == "k512" else K // 2
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
        # The largest setting (1024 x 5504 tiles, 2048-deep K) asks about 75 MiB of VMEM with its
        # blocks double-buffered: above the default scoped limit, inside the chip's 128 MiB.
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(x, wq, scale.reshape(1, N), bias.reshape(1, N))
