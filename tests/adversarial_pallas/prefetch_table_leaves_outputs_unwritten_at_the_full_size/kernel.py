# Attack: the GEMM's N and K grid axes a fixed count (5 and 3), output and input blocks named
# through scalar-prefetched tables (N: arange(5) * nbn // 5, consecutive repeats only; K: arange(3) % nk):
# the whole C where checked, 5 of 112 column tiles (and 3 of 32 K blocks) at the full size.
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

MI, NJ, KS = 2, 5, 3


def _body(ti_ref, tj_ref, tk_ref, a_ref, b_ref, c_ref, acc_ref, *, nk):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < nk)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256
    nk = K // bk
    ti = jnp.arange(M // bm, dtype=jnp.int32)
    tj = jnp.arange(NJ, dtype=jnp.int32) * (N // bn) // NJ
    tk = jnp.arange(KS, dtype=jnp.int32) % nk
    return pl.pallas_call(
        functools.partial(_body, nk=nk),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3,
            grid=(M // bm, NJ, KS),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k, a, b, c: (a[i], c[k])),
                      pl.BlockSpec((bk, bn), lambda i, j, k, a, b, c: (c[k], b[j]))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k, a, b, c: (a[i], b[j])),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
    )(ti, tj, tk, A, B)
