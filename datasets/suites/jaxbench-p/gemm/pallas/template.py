# The starter's tiled matmul with its decisions as knobs (pallas.json "knobs"; an episode's `knobs`
# action prepends one `NAME = value` line per knob). Every block size divides every size set
# (M, N, K are multiples of 256 in small, check and full), so the full-size program is the checked
# one at other sizes: the estimate is paid (docs/pallas.md "What is paid is what was checked").
#   BM, BN   the output tile (rows of A, columns of B)
#   K_BLOCK  "tile": 256-deep K slices summed over an innermost grid axis; "whole": each step
#            reads the whole K extent (a quarter as many grid steps at 256 x 256 tiles, 32x fewer
#            at the full size, and larger DMAs; its blocks need the raised VMEM limit below)
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
    bm, bn = BM, BN
    bk = K if K_BLOCK == "whole" else 256
    return pl.pallas_call(
        _matmul_block,
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        # Whole-K blocks at the full size are 2-4 MiB each, double-buffered: above the default
        # scoped VMEM limit, well inside the chip's VMEM.
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=64 * 1024 * 1024),
    )(A, B)
