import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive RetNet parallel retention. Grid (batch, head, query block, key block); the key axis is
# the reduction: for each (query block, key block) pair on or below the diagonal the kernel forms
# the decayed scores s = (q k^T) / sqrt(DK) * gamma_h^(n-m) (zero above the diagonal) and
# accumulates s @ v and sum |s| in VMEM scratch; after the last key block it writes
# acc / max(sum |s|, 1). No online rescaling is needed: the normalization is a plain sum.
# 128x128 score tiles; each step holds q, k, v, out tiles of 128 x DK/DV floats.
BQ = 128
BK = 128


def _retention_block(log_gamma_ref, q_ref, k_ref, v_ref, o_ref, acc_ref, abs_ref):
    h, qi, ki = pl.program_id(1), pl.program_id(2), pl.program_id(3)
    bq, bk = q_ref.shape[0], k_ref.shape[0]

    @pl.when(ki == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
        abs_ref[...] = jnp.zeros_like(abs_ref)

    @pl.when(ki * bk <= qi * bq + bq - 1)  # the block has at least one pair with m <= n
    def _():
        q = q_ref[...]
        k = k_ref[...]
        scale = 1.0 / (float(q.shape[-1]) ** 0.5)
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        n = (qi * bq + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)).astype(jnp.float32)
        m = (ki * bk + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)).astype(jnp.float32)
        dist = n - m
        decay = jnp.where(dist >= 0.0, jnp.exp(log_gamma_ref[h] * jnp.maximum(dist, 0.0)), 0.0)
        s = s * decay
        abs_ref[...] += jnp.sum(jnp.abs(s), axis=-1, keepdims=True)
        # the weights in the inputs' dtype (bfloat16) for the MXU; the sum stays float32
        acc_ref[...] += jnp.dot(s.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)

    @pl.when(ki == pl.num_programs(3) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / jnp.maximum(abs_ref[...], 1.0)).astype(o_ref.dtype)


def kernel(q, k, v):
    b, h, s, dk = q.shape
    dv = v.shape[-1]
    bq, bk = min(s, BQ), min(s, BK)
    assert s % bq == 0 and s % bk == 0, s
    # log(gamma_h), gamma_h = 1 - 2^(-5-h): H scalars, read from SMEM by the kernel.
    log_gamma = jnp.log(1.0 - jnp.power(jnp.float32(2.0), -5.0 - jnp.arange(h, dtype=jnp.float32)))

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(b, h, s // bq, s // bk),
        in_specs=[pl.BlockSpec((None, None, bq, dk), lambda bi, hi, qi, ki, lg: (bi, hi, qi, 0)),
                  pl.BlockSpec((None, None, bk, dk), lambda bi, hi, qi, ki, lg: (bi, hi, ki, 0)),
                  pl.BlockSpec((None, None, bk, dv), lambda bi, hi, qi, ki, lg: (bi, hi, ki, 0))],
        out_specs=pl.BlockSpec((None, None, bq, dv), lambda bi, hi, qi, ki, lg: (bi, hi, qi, 0)),
        scratch_shapes=[pltpu.VMEM((bq, dv), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32)],
    )
    return pl.pallas_call(
        _retention_block,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((b, h, s, dv), q.dtype),
    )(log_gamma, q, k, v)
