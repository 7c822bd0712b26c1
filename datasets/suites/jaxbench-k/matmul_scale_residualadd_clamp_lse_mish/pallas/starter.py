import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred):
    # The preferred tile when it divides the dimension, else the whole dimension (always legal).
    return preferred if dim % preferred == 0 else dim


def _linear_lse_mish_block(x_ref, w_ref, b_ref, y_ref, acc_ref, sum_ref):
    # Grid (i, j, k): acc[i, j] += x[i, k] . weight[j, k]^T over k. On the last k step the tile
    # z = clamp(2 * (acc + bias) doubled, -10, 10) adds its row sums of exp(z) into a running sum
    # over the j tiles (z <= 10, so exp needs no max shift). The last j takes the log and applies
    # t * mish(t).
    j, k = pl.program_id(1), pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when((j == 0) & (k == 0))
    def _():
        sum_ref[...] = jnp.zeros_like(sum_ref)

    # weight is in nn.Linear layout [N, K]: contract the last dim of both blocks (x . w^T).
    acc_ref[...] += jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
                                        precision=jax.lax.Precision.HIGHEST,
                                        preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        u = (acc_ref[...] + b_ref[...]) * 2.0
        u = jnp.clip(u + u, -10.0, 10.0)  # scale, residual add, clamp
        sum_ref[...] += jnp.sum(jnp.exp(u), axis=1, keepdims=True)

    @pl.when((j == pl.num_programs(1) - 1) & (k == pl.num_programs(2) - 1))
    def _():
        t = jnp.log(sum_ref[...])
        softplus = jnp.maximum(t, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(t)))
        y_ref[...] = (t * (t * jnp.tanh(softplus))).astype(y_ref.dtype)


def kernel(x, weight, bias):
    M, K = x.shape
    N = weight.shape[0]
    # 256x256 output tiles, 256-deep K slices: 256 KiB float32 blocks, plain and small.
    bm, bn, bk = _tile(M, 256), _tile(N, 256), _tile(K, 256)
    return pl.pallas_call(
        _linear_lse_mish_block,
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bn, bk), lambda i, j, k: (j, k)),
                  pl.BlockSpec((1, bn), lambda i, j, k: (0, j))],
        # the (bm, 1) output column stays resident over j and k (the reduction axes)
        out_specs=pl.BlockSpec((bm, 1), lambda i, j, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((M, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32), pltpu.VMEM((bm, 1), jnp.float32)],
    )(x, weight, bias.reshape(1, N))  # bias as a (1, N) row: Mosaic wants 2D blocks
