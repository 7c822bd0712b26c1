# Honest: the flash starter with its causal mask added (s + where(col > row, -1e30, 0)) instead of
# selected. The running max is then a decision between data and a number that follows the grid
# positions, through a scratch ref; the data changes its outcome at the full size (at the last
# step; at the first the max is just set to -inf), so it is a choice made at run time, which the
# compiler cannot fold and the estimate prices both ways. Refused before (round 9's false positive).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _attention_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    # Grid (b, h, qi, ki), ki innermost: one (bq, D) query block against one (bk, D) key/value
    # block, online softmax state (running max m, running sum l, unnormalized output acc) kept in
    # VMEM scratch across the key blocks; the output block is written on the last key block.
    qi, ki = pl.program_id(2), pl.program_id(3)
    bq, bk = q_ref.shape[0], k_ref.shape[0]

    @pl.when(ki == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # Causal: a key block that starts after this query block's last row contributes nothing.
    @pl.when(ki * bk <= qi * bq + bq - 1)
    def _():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        row = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        col = ki * bk + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = s + jnp.where(col > row, -1e30, 0.0)  # additive causal mask (honest, common)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=1, keepdims=True)
        # p in the inputs' dtype (bfloat16) for the MXU; the sum stays float32
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(p.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(3) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v):
    B, H, S, D = q.shape
    # 128 query rows x 128 keys per step: (128, D) bfloat16 blocks of 32 KiB at D=128.
    bq, bk = _tile(S, 128), _tile(S, 128)
    scale = 1.0 / (float(D) ** 0.5)
    sq = pl.Squeezed()
    q_spec = pl.BlockSpec((sq, sq, bq, D), lambda b, h, i, j: (b, h, i, 0))
    kv_spec = pl.BlockSpec((sq, sq, bk, D), lambda b, h, i, j: (b, h, j, 0))
    body = lambda *refs: _attention_block(*refs, scale=scale)
    return pl.pallas_call(
        body,
        grid=(B, H, S // bq, S // bk),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, D), jnp.float32)],
    )(q, k, v)
