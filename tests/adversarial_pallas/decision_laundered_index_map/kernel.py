# A GEMM whose index maps read K block `k` only while v < 4, and block 0 otherwise, where v is
# K/256 laundered through a two-trip loop that hands its carry back (Mosaic folds it to its
# start). Where checked (K/256 = 2, 3) every K block is read and the answers are right; at the
# full size (32) every step reads the same two blocks, so their copies are skipped after the
# first and the estimate prices a kernel that fetches 1/32 of its inputs. The judge must not
# take v for data inside an index map either.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 256


def _laundered(x):
    return jax.lax.fori_loop(0, 2, lambda t, c: c + 0, x)


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
    steps = K // TILE

    def k_block(k):
        return jnp.where(_laundered(k * 0 + steps) < 4, k, 0)

    return pl.pallas_call(
        _body, grid=(M // TILE, N // TILE, steps),
        in_specs=[pl.BlockSpec((TILE, TILE), lambda i, j, k: (i, k_block(k))),
                  pl.BlockSpec((TILE, TILE), lambda i, j, k: (k_block(k), j))],
        out_specs=pl.BlockSpec((TILE, TILE), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((TILE, TILE), jnp.float32)],
    )(A, B)
