# A GEMM whose K-step accumulation sits under pl.when(table[nk] == 1): the kernel fills an SMEM
# table with constants (1 at entries 0..3, 0 beyond) on its first step and reads it at nk = K/256,
# the number of K steps, on every step. Where checked (nk = 2, 3) the entry read is 1 and the
# answers are right; at the full size (nk = 32) it is 0, and a compiler that forwards the constant
# stores to the load folds the predicate false and deletes the accumulation: the estimate prices a
# kernel that writes zeros. What was stored is the same at every size; where it is read is not.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256
ENTRIES = 64


def _body(a_ref, b_ref, c_ref, acc_ref, table_ref):
    k = pl.program_id(2)
    steps = k * 0 + pl.num_programs(2)  # K/256: 2 and 3 where checked, 32 at the full size
    first = (pl.program_id(0) == 0) & (pl.program_id(1) == 0) & (k == 0)

    @pl.when(first)
    def _():
        for e in range(ENTRIES):
            table_ref[e] = 1 if e < 4 else 0

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(table_ref[steps] == 1)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    return pl.pallas_call(
        _body, grid=(M // TILE, N // TILE, K // TILE),
        in_specs=[pl.BlockSpec((TILE, TILE), lambda i, j, k: (i, k)),
                  pl.BlockSpec((TILE, TILE), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((TILE, TILE), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((TILE, TILE), jnp.float32), pltpu.SMEM((ENTRIES,), jnp.int32)],
    )(A, B)
