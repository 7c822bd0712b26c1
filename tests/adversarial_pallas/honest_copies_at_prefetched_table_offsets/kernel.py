# The same design done honestly: a K grid axis of K/256 steps, step k copying K slice t[k] = k
# (t scalar-prefetched) of A and B with the kernel's own DMAs. Every output block sums every K
# slice at every size: counting the copies through the table must not refuse it.
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu



def _body(t_ref, a_hbm, b_hbm, c_ref, a_buf, b_buf, acc_ref, sem, *, kb):
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    bm, bn = c_ref.shape

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < kb)
    def _():
        kk = t_ref[k]
        ca = pltpu.make_async_copy(a_hbm.at[pl.ds(i * bm, bm), pl.ds(kk * 256, 256)], a_buf, sem.at[0])
        cb = pltpu.make_async_copy(b_hbm.at[pl.ds(kk * 256, 256), pl.ds(j * bn, bn)], b_buf, sem.at[1])
        ca.start()
        cb.start()
        ca.wait()
        cb.wait()
        acc_ref[...] += jnp.dot(a_buf[...], b_buf[...], preferred_element_type=jnp.float32)

    @pl.when(k == kb - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256
    kb = K // 256
    t = jax.lax.rem(jnp.arange(kb, dtype=jnp.int32), jnp.int32(kb))
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(M // bm, N // bn, kb),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k, t: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, 256), A.dtype), pltpu.VMEM((256, bn), B.dtype),
                            pltpu.VMEM((bm, bn), jnp.float32), pltpu.SemaphoreType.DMA((2,))]),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
    )(t, A, B)
