# The starter's tiled matmul + bias + ReLU with its decisions as knobs (pallas.json "knobs"; an
# episode's `knobs` action prepends one `NAME = value` line per knob). A block is either the
# starter's constant 256 (256 divides M, N and K in every size set) or a fixed fraction of its
# dimension (M / 2 x N / 4: 128 x 128 and 256 x 192 at the checked sizes, 512 x 2048 at the full
# size), so each setting follows the task's sizes in one way at every size set and its full-size
# program is proven the checked one (docs/pallas.md "What is paid is what was checked").
#   OUT_TILE the output tile: "t256" 256 x 256 (the starter's); "m2n4" M / 2 x N / 4; "m1n8" the
#            whole of M x N / 8 (1024 x 1024 at the full size): larger tiles read x and weight
#            fewer times from HBM
#   K_BLOCK  the contraction's step: "tile" 256 deep (the starter's); "k4" K / 4 (2048 at the full
#            size): fewer, longer grid steps and larger DMAs
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
    tm, tn = {"t256": (_tile(m), _tile(n)), "m2n4": (m // 2, n // 4), "m1n8": (m, n // 8)}[OUT_TILE]
    tk = _tile(k) if K_BLOCK == "tile" else k // 4
    b2 = bias.reshape(1, n)
    params = {}
    if OUT_TILE != "t256" or K_BLOCK != "tile":
        # float32 blocks up to 16 MiB (a 2048 x 2048 weight block), double-buffered: above v5e's
        # default scoped VMEM limit, inside the chip's 128 MiB
        params["compiler_params"] = pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024)
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
        **params,
    )(x, weight, b2)
