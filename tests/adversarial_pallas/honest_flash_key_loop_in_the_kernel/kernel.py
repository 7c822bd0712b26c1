import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _attention_row_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, bk):
    # One (bq, D) query block per grid step; every key/value block walked by an in-kernel loop
    # (the causal mask hides the later ones), the online-softmax state in VMEM scratch.
    qi = pl.program_id(2)
    bq = q_ref.shape[0]
    m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
    l_ref[...] = jnp.zeros_like(l_ref)
    acc_ref[...] = jnp.zeros_like(acc_ref)
    q = q_ref[...]

    def body(j, carry):
        start = pl.multiple_of(j * bk, bk)
        k = k_ref[pl.ds(start, bk), :]
        v = v_ref[pl.ds(start, bk), :]
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        row = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        col = start + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
        m_ref[...] = m_new
        return carry

    jax.lax.fori_loop(0, k_ref.shape[0] // bk, body, 0)
    o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v):
    B, H, S, D = q.shape
    bq = bk = _tile(S, 128)
    scale = 1.0 / (float(D) ** 0.5)
    sq = pl.Squeezed()
    q_spec = pl.BlockSpec((sq, sq, bq, D), lambda b, h, i: (b, h, i, 0))
    kv_spec = pl.BlockSpec((sq, sq, S, D), lambda b, h, i: (b, h, 0, 0))
    body = lambda *refs: _attention_row_block(*refs, scale=scale, bk=bk)
    return pl.pallas_call(
        body,
        grid=(B, H, S // bq),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, D), jnp.float32)],
    )(q, k, v)
