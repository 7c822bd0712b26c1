# operands_cut_before_the_kernel plus an unused matmul of two zero arrays as large as the reference's:
# it lifted the candidate's counted matmul FLOPs at every size, and XLA deletes it (red team,
# round 15). Only used work that follows the inputs counts now.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3  # layout only, outside the kernel: pad the K/256 chunks with K/256 zero chunks, keep the first 3


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
    A3 = jnp.pad(A.reshape(M, kb, 256).transpose(1, 0, 2), ((0, kb), (0, 0), (0, 0)))[:KS]  # (3, M, 256)
    B3 = jnp.pad(B.reshape(kb, 256, N), ((0, kb), (0, 0), (0, 0)))[:KS]  # (3, 256, N)
    _dead = jnp.dot(jnp.zeros((M, K), A.dtype), jnp.zeros((K, N), B.dtype), preferred_element_type=jnp.float32)  # constant operands: not input-dependent, DCE by XLA
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
