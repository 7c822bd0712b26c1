# Round 11 attack, pipelined form: the starter's kernel with the K grid axis of a FIXED extent 3
# (the same at every size set) and 256-deep K blocks; block k reads K block min(k, K/256 - 1)
# and is accumulated only where k < K/256 (the honest tail guard). Checked K = 512, 768 are
# covered (2, 3 blocks); at the full size (K = 8192: 32 blocks) three of 32 are computed.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KSTEPS = 3


def _matmul_block(a_ref, b_ref, c_ref, acc_ref, *, nk):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < nk)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256  # the starter's tiles: a few steps where checked (the suite's time)
    nk = K // bk
    return pl.pallas_call(
        lambda *r: _matmul_block(*r, nk=nk),
        grid=(M // bm, N // bn, KSTEPS),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, jnp.minimum(k + 1, nk) - 1)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (jnp.minimum(k + 1, nk) - 1, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(A, B)
