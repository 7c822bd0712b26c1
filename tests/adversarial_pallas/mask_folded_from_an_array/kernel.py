# A GEMM whose K-step products are multiplied, as integer bits, by a mask of one number in a (1, 1)
# array: the sign bit of K/256 - 8, which is 1 where checked (K/256 = 2, 3) and 0 at the full size
# (32). No decision anywhere; at the full size the compiler folds the mask to 0, the integer
# multiply to 0 and deletes the dots feeding it, so the estimate prices a kernel that writes zeros.
# An array of one number computed from the sizes has a sign, an outcome like a decision's: the
# full size's must have occurred where checked.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256


def _body(a_ref, b_ref, c_ref, acc_ref):
    k = pl.program_id(2)
    steps = pl.num_programs(2)  # K/256: 2 and 3 where checked, 32 at the full size
    keep = -((jnp.full((1, 1), steps, jnp.int32) - 8) >> 31)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    product = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    bits = jax.lax.bitcast_convert_type(product, jnp.int32) * keep
    acc_ref[...] += jax.lax.bitcast_convert_type(bits, jnp.float32)

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
        scratch_shapes=[pltpu.VMEM((TILE, TILE), jnp.float32)],
    )(A, B)
