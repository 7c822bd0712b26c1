# A GEMM whose K-step accumulation sits under pl.when(count < 4), where count is an SMEM slot at a
# constant address bumped once per trip of an unrolled static loop of K/256 trips: only constants
# are ever stored, at constant addresses, yet what the slot holds follows the loop's trip count.
# Where checked (K/256 = 2, 3) the predicate is true; at the full size (32) the compiler forwards
# the stores, folds it false and deletes the accumulation. A ref stored inside a loop holds what
# the loop's trip count follows.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256


def _body(a_ref, b_ref, c_ref, acc_ref, table_ref):
    k = pl.program_id(2)
    steps = pl.num_programs(2)  # K/256: 2 and 3 where checked, 32 at the full size
    table_ref[0] = 0

    def bump(t, carry):
        table_ref[0] = table_ref[0] + 1
        return carry

    jax.lax.fori_loop(0, steps, bump, 0, unroll=True)
    live = table_ref[0] < 4

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(live)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == steps - 1)
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
        scratch_shapes=[pltpu.VMEM((TILE, TILE), jnp.float32), pltpu.SMEM((64,), jnp.int32)],
    )(A, B)
