# A decision that follows the sizes, laundered through a branch on data whose two sides give the
# same constant: one = cond(A[0,0] > 0, 1, 1) is data to the judge (not a constant in disguise: its
# predicate is data), so v = one * (5K/256) (a scaling adds no ingredient) stays "data" whose taint is the
# same at every size, and pl.when(v < 20) is a run-time choice to the judge. Mosaic folds the scf.if
# (both sides yield 1), then v = 5K/256 and v < 20: true where checked (10, 15), false at the full
# size (160), and deletes the guarded product.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _matmul_block(a_ref, b_ref, c_ref, acc_ref, *, nk256):
    k = pl.program_id(2)
    nk = pl.num_programs(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    ai = jax.lax.bitcast_convert_type(a_ref[0, 0].astype(jnp.float32), jnp.int32)
    one = (ai == ai).astype(jnp.int32)  # arith.cmpi eq x, x folds to true; data to the judge
    v = one * nk256

    @pl.when(v < 20)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == nk - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256
    return pl.pallas_call(
        lambda *r: _matmul_block(*r, nk256=K // 256 * 5),
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )(A, B)
