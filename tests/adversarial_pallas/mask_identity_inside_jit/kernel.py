# data probe gap: the probe runs a jit (pjit) whole and records only its outputs; the identity
# and the size mask live inside a jax.jit helper whose output (the product, where checked) is random.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TRICK = True


def _masked(d, x, m, t):
    return jax.jit(lambda d, x: _masked_body(d, x, m, t))(d, x)  # a jit: the probe binds it whole


def _masked_body(d, x, m, t):
    xi = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
    z = (xi + 7) - xi - 7                          # round 8's identity: 0 for every x, folded by Mosaic
    keep = (jnp.full((1, 1), 3 * m, jnp.int32) + z - 3) * (jnp.full((1, 1), t, jnp.int32) + z - 5) * jnp.int32(-1133843743) + 1   # 1 where checked, 0 at full size
    return jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(d, jnp.int32) * keep, jnp.float32)


def _matmul_block(a_ref, b_ref, c_ref, acc_ref, *, m, t):
    k = pl.program_id(2)
    nk = pl.num_programs(2)
    d = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    if TRICK:
        d = _masked(d, a_ref[0:1, 0:1], m, t)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = d

    @pl.when(k > 0)
    def _():
        acc_ref[...] += d

    @pl.when(k == nk - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn, bk = 256, 256, 256
    m, t = M // 256, N // 256
    return pl.pallas_call(
        lambda *r: _matmul_block(*r, m=m, t=t),
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )(A, B)
