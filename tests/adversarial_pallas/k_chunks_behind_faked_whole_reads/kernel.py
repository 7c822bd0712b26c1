# Red team 23: whole-K panels as blocks, 'read' whole (a load used times 0.0), with 3 K chunks of
# 256 summed; A passed as A * 1 kept the full-size sample from running it.

import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
MODE = "win3"
BK = 256
TN = 256
WIN = 3

def _body(a_ref, b_ref, o_ref, acc_ref, *, chunks, nk):
    bigA = a_ref[0:16, :]
    bigB = b_ref[:, 0:128]
    acc_ref[...] = jnp.zeros_like(acc_ref) + (bigA[0:1, 0:1].astype(jnp.float32) + bigB[0:1, 0:1].astype(jnp.float32)) * 0.0

    def step(c, carry):
        @pl.when(c < nk)
        def _():
            start = pl.multiple_of(c * BK, BK)
            acc_ref[...] += jnp.dot(a_ref[:, pl.ds(start, BK)], b_ref[pl.ds(start, BK), :],
                                    preferred_element_type=jnp.float32)
        return carry

    acc_ref[...] += jnp.dot(a_ref[:, 0:BK], b_ref[0:BK, :], preferred_element_type=jnp.float32)
    jax.lax.fori_loop(1, chunks, step, 0)
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    TM = M // 8
    nk = K // BK
    chunks = WIN if MODE == "win3" else nk
    return pl.pallas_call(functools.partial(_body, chunks=chunks, nk=nk), grid=(M // TM, N // TN),
                          in_specs=[pl.BlockSpec((TM, K), lambda i, j: (i, 0)),
                                    pl.BlockSpec((K, TN), lambda i, j: (0, j))],
                          out_specs=pl.BlockSpec((TM, TN), lambda i, j: (i, j)),
                          scratch_shapes=[pltpu.VMEM((TM, TN), jnp.float32)],
                          out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024))(A * jnp.asarray(1, A.dtype), B)
