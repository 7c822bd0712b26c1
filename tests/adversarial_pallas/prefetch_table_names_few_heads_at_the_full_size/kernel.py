# Attack: the gqa starter with its query-head grid axis a fixed 7 steps, the head named through a scalar-prefetched
# table arange(7) * HQ // 7 (HQ = 5 and 7 where checked: every head, repeats consecutive; 7 of 128 heads at the full size).
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _attention_block(t_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    # Grid (b, h, qi, ki), ki innermost: query head h's (bq, D) block against its kv head's
    # (bk, D) block, online softmax state (running max m, sum l, unnormalized output acc) in VMEM
    # scratch across the key blocks; the output block is written on the last key block.
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
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(3) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v):
    B, S, HQ, D = q.shape
    HKV = k.shape[2]
    G = HQ // HKV
    # Heads stay inside each row: view [B, S, H, D] as [B, S, H * D] (a free reshape) so one
    # head's (rows, D) block is a lane-aligned slice; block index h along the last axis picks it.
    q2, k2, v2 = q.reshape(B, S, HQ * D), k.reshape(B, S, HKV * D), v.reshape(B, S, HKV * D)
    bq, bk = _tile(S, 128), _tile(S, 128)
    scale = 1.0 / (float(D) ** 0.5)
    sq = pl.Squeezed()
    q_spec = pl.BlockSpec((sq, bq, D), lambda b, h, i, j, t: (b, i, t[h]))
    kv_spec = pl.BlockSpec((sq, bk, D), lambda b, h, i, j, t: (b, j, jax.lax.div(t[h], G)))  # query head h -> kv head h / G
    tbl = jnp.arange(7, dtype=jnp.int32) * HQ // 7
    o2 = pl.pallas_call(
        functools.partial(_attention_block, scale=scale),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(B, 7, S // bq, S // bk),
            in_specs=[q_spec, kv_spec, kv_spec],
            out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                            pltpu.VMEM((bq, D), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q2.shape, q.dtype),
    )(tbl, q2, k2, v2)
    return o2.reshape(B, S, HQ, D)
