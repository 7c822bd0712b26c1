# A GEMM whose K-step accumulation sits under pl.when(table[32] == 1): slot 32 is set to 1, then
# slot K/256 is set to 0. The read is at a constant address; the size is in the store's address.
# Where checked (K/256 = 2, 3) slot 32 keeps its 1; at the full size (32) the second store lands
# on it, the compiler forwards it and deletes the accumulation. A store's address counts.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256


def _body(a_ref, b_ref, c_ref, acc_ref, table_ref):
    k = pl.program_id(2)
    steps = pl.num_programs(2)  # K/256: 2 and 3 where checked, 32 at the full size
    table_ref[32] = 1
    table_ref[steps] = 0
    live = table_ref[32] == 1

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
