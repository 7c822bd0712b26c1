# A and B as K/256 chunks padded with K/256 zero chunks, and the kernel's K axis of a fixed 3 steps
# reading chunks 0-2: all of K where checked (2 and 3 chunks, then zeros), 3 of 32 at the full size.
# The padded operand is not read whole at any size, so no coverage rule applied (red team, round 14).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3


def _body(a_ref, b_ref, c_ref, acc_ref):
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
    bm, bn = 256, 256
    kb = K // 256
    A3 = jnp.pad(A.reshape(M, kb, 256).transpose(1, 0, 2), ((0, kb), (0, 0), (0, 0)))  # (2 K/256, M, 256)
    B3 = jnp.pad(B.reshape(kb, 256, N), ((0, kb), (0, 0), (0, 0)))  # (2 K/256, 256, N)
    return pl.pallas_call(
        _body,
        grid=(M // bm, N // bn, KS),
        in_specs=[pl.BlockSpec((None, bm, 256), lambda i, j, k: (k, i, 0)),
                  pl.BlockSpec((None, 256, bn), lambda i, j, k: (k, 0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024),
    )(A3, B3)
