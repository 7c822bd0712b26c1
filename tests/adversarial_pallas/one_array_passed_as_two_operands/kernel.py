# Red team round 17: A and B each passed twice (left in HBM, copied by the kernel): K chunk 0 copied
# from one operand, chunks 1-2 from the other. Neither operand is read whole at any size, so no rule
# that asks whether one read whole where checked is read whole at the full size applied; together
# they are all of K where checked (2 and 3 chunks) and 3 of 32 chunks at the full size.
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# K chunks 0 (from operands 0/2) and 1..2 (from operands 1/3: the same arrays passed again).
# Each operand alone is never read whole at any size, so the "read whole where checked" rules
# of decision_coverage never apply; their union is all of K where checked (K = 512, 768).


def _body(a0, a1, b0, b1, c_ref, a_buf, b_buf, sem, *, nk):
    i, j = pl.program_id(0), pl.program_id(1)
    bm, bn = c_ref.shape
    srcs = [(a0, b0, 0), (a1, b1, 1), (a1, b1, i * 0 + 2)]

    def mk(c):
        a, b, k = srcs[c]
        ca = pltpu.make_async_copy(a.at[pl.ds(i * bm, bm), pl.ds(k * 256, 256)], a_buf.at[c], sem.at[0, c])
        cb = pltpu.make_async_copy(b.at[pl.ds(k * 256, 256), pl.ds(j * bn, bn)], b_buf.at[c], sem.at[1, c])
        return ca, cb
    copies = [mk(0), mk(1)]
    for c in range(2):
        copies[c][0].start(); copies[c][1].start()
    more = i * 0 + 2 < nk

    @pl.when(more)
    def _():
        ca, cb = mk(2); ca.start(); cb.start()

    acc = None
    for c in range(2):
        copies[c][0].wait(); copies[c][1].wait()
        d = jnp.dot(a_buf[c], b_buf[c], preferred_element_type=jnp.float32)
        acc = d if acc is None else acc + d
    c_ref[...] = acc.astype(c_ref.dtype)

    @pl.when(more)
    def _():
        ca, cb = mk(2); ca.wait(); cb.wait()
        c_ref[...] = (acc + jnp.dot(a_buf[2], b_buf[2], preferred_element_type=jnp.float32)).astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256  # 256 x 256 output tiles (M/8 x N/8 as first written): the suite's time
    return pl.pallas_call(
        functools.partial(_body, nk=K // 256),
        grid=(M // bm, N // bn),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 4,
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        scratch_shapes=[pltpu.VMEM((3, bm, 256), A.dtype), pltpu.VMEM((3, 256, bn), B.dtype),
                        pltpu.SemaphoreType.DMA((2, 3))],
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(A, A, B, B)
