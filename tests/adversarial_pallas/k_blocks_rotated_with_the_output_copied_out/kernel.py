# A K axis of a fixed 3 steps naming K block (i + j + k) mod (K/256) in plain index maps, with the
# output left in HBM (pl.ANY) and its C block copied out by the kernel itself to (i, j): the output's
# index map names one block for the whole grid, so every grid step counted as working for one output
# block, which reads every K block (outside red team, round 14).
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3


def _body(a_ref, b_ref, c_hbm, acc_ref, out_buf, sem, *, kb):
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    bm, bn = acc_ref.shape

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < kb)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == KS - 1)
    def _():
        out_buf[...] = acc_ref[...].astype(out_buf.dtype)
        cp = pltpu.make_async_copy(out_buf, c_hbm.at[pl.ds(i * bm, bm), pl.ds(j * bn, bn)], sem.at[0])
        cp.start()
        cp.wait()


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256
    kb = K // 256
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid=(M // bm, N // bn, KS),
        in_specs=[pl.BlockSpec((bm, 256), lambda i, j, k: (i, jax.lax.rem(i + j + k, kb))),
                  pl.BlockSpec((256, bn), lambda i, j, k: (jax.lax.rem(i + j + k, kb), j))],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32), pltpu.VMEM((bm, bn), A.dtype),
                        pltpu.SemaphoreType.DMA((1,))],
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024),
    )(A, B)
