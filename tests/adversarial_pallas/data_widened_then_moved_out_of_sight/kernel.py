# Red team round 17: A and B written into zeros of a width of the candidate's choosing (8192 K/M:
# 16384 and 12288 where checked, 8192 at the full size), then reshaped so that the layout walk lost
# the data's positions, then cut to 768 columns: all of K where checked, 768 of 8192 at the full size.
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# K cut to a fixed 768 through an "opaque" value whose extent *shrinks* from the checked sizes to
# the full one: the K data is written into zeros of width C*K/M (16384, 12288, 8192 at the small,
# check and full sizes: always room for K), a reshape that does not keep the data's region a box
# makes the value opaque (all of it counted as data), and [:768] keeps a share that is *larger*
# at the full size (768/8192) than where checked (768/16384, 768/12288).
C = 8192
KC = 768


def _widen_cols(x, width):
    """x (R, K) written into zeros (R, width), passed through a reshape pair (R/2, 2*width)."""
    R = x.shape[0]
    z = lax.dynamic_update_slice(jnp.zeros((R, width), x.dtype), x, (0, 0))
    z = lax.reshape(z, (R // 2, 2 * width))
    return lax.reshape(z, (R, width))


def _mm(a_ref, b_ref, c_ref, acc_ref):
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
    width = C * K // M
    a = lax.slice(_widen_cols(A, width), (0, 0), (M, KC))            # (M, 768)
    bt = _widen_cols(lax.transpose(B, (1, 0)), width)                # (N, width)
    b = lax.transpose(lax.slice(bt, (0, 0), (N, KC)), (1, 0))        # (768, N)
    bm, bn, bk = 256, 256, 256  # (M/8 x N/8 as first written: the suite's time)
    return pl.pallas_call(
        _mm,
        grid=(M // bm, N // bn, KC // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=100 * 1024 * 1024),
    )(a, b)
