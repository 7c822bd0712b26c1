# Honest: output tiles M/8 x N/8 on a 2-D grid; inside, fori_loop over the K // 256 chunks
# (trip count follows K), each chunk copied from HBM and accumulated into a float32 VMEM scratch
# zeroed first. No guard, no trick.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _body(a_hbm, b_hbm, c_ref, acc_ref, a_buf, b_buf, *, nk, bm, bn, bk):
    i, j = pl.program_id(0), pl.program_id(1)
    acc_ref[...] = jnp.zeros_like(acc_ref)

    def step(t, carry):
        pltpu.sync_copy(a_hbm.at[pl.ds(i * bm, bm), pl.ds(t * bk, bk)], a_buf)
        pltpu.sync_copy(b_hbm.at[pl.ds(t * bk, bk), pl.ds(j * bn, bn)], b_buf)
        acc_ref[...] += jnp.dot(a_buf[...], b_buf[...], preferred_element_type=jnp.float32)
        return carry

    jax.lax.fori_loop(0, nk, step, 0)
    c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256  # the starter's tiles: a few steps where checked (the suite's time)
    return pl.pallas_call(
        lambda *r: _body(*r, nk=K // bk, bm=bm, bn=bn, bk=bk),
        grid=(M // bm, N // bn),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32), pltpu.VMEM((bm, bk), A.dtype),
                        pltpu.VMEM((bk, bn), B.dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(A, B)
