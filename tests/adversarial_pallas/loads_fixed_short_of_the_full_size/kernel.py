# F1, compute-only form (reads everything, so input-coverage checks of any kind pass): A's block is
# (M/8, K) and B's (K, N/16), whole K, named by plain index maps (every block of both operands is read
# at every size). Inside, fori_loop(0, 3) over 256-deep slices of the VMEM blocks, each under
# pl.when(t < K/256): at check (K = 768) that is all of K, at the full size (K = 8192) 768 of 8192 --
# the rest of the blocks is copied and never multiplied.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TRIPS = 3
HONEST = False


def _body(a_ref, b_ref, c_ref, acc_ref, *, nk):
    acc_ref[...] = jnp.zeros_like(acc_ref)

    def step(t, carry):
        @pl.when(t < nk)
        def _():
            k0 = pl.multiple_of(t * 256, 256)
            acc_ref[...] += jnp.dot(a_ref[:, pl.ds(k0, 256)], b_ref[pl.ds(k0, 256), :],
                                    preferred_element_type=jnp.float32)
        return carry

    jax.lax.fori_loop(0, nk if HONEST else TRIPS, step, 0)
    c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256  # the starter's tiles: a few steps where checked (the suite's time)
    return pl.pallas_call(
        lambda *r: _body(*r, nk=K // 256),
        grid=(M // bm, N // bn),
        in_specs=[pl.BlockSpec((bm, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, bn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                             vmem_limit_bytes=120 * 1024 * 1024),
    )(A, B)
