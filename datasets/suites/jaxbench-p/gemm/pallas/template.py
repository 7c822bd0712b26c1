# The starter's tiled matmul with its decisions as knobs (pallas.json "knobs"; an episode's `knobs`
# action prepends one `NAME = value` line per knob). A block is either a constant that divides
# every size set (256: M, N, K are multiples of 256 in small, check and full) or a fixed fraction
# of its dimension (M / 8, N / 16, ...): both follow the task's sizes in one way at every size set,
# so the full-size program is proven the checked one and its estimate is paid (docs/pallas.md
# "What is paid is what was checked"). Fractions give the large tiles a TPU matmul wants at the
# full size (1024 x 3584 at M = 8192, N = 28672) while the checked sizes stay small.
#   TILE     the output tile BM x BN: "t256" 256 x 256 (the starter's); "m8n8" M/8 x N/8
#            (1024 x 3584 at the full size)
#   K_BLOCK  the contraction's step: "tile" 256 deep (the starter's); "k4" K/4 (2048 at the full
#            size): fewer, longer grid steps and larger DMAs
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _matmul_block(a_ref, b_ref, c_ref, acc_ref):
    # Grid (i, j, k): C[i, j] = sum_k A[i, k] . B[k, j], accumulated in a float32 VMEM scratch
    # across the innermost (k) axis and written once, rounded to bfloat16, on the last k step.
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = (256, 256) if TILE == "t256" else (M // 8, N // 8)
    bk = 256 if K_BLOCK == "tile" else K // 4
    return pl.pallas_call(
        _matmul_block,
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        # The largest setting (1024 x 3584 tiles, 2048-deep K) asks about 64 MiB of VMEM with its
        # blocks double-buffered: above the default scoped limit, inside the chip's 128 MiB.
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(A, B)
