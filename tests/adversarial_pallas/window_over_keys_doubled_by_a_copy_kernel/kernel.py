# Red team 25: a window of 3 key blocks per query block (every key at the checked sizes, 384 of
# 4096 at the full size), the keys and values first doubled into [k; k] by a copy kernel and key
# block 0 read from the second copy, so that no output block's reads are its whole prefix, the
# whole operand or one aligned interval; each step takes every head, so a sampled output block
# reads 6M elements of the copy kernel's output: past the sample's bound on such reads, which
# left it to the proof.

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

WIN = 3


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _copy_block(x_ref, y_ref):
    y_ref[...] = x_ref[...]


def _doubled(x, bs):
    B, H, S, D = x.shape
    n = S // bs
    return pl.pallas_call(
        _copy_block,
        grid=(B, 2 * n),
        in_specs=[pl.BlockSpec((None, H, bs, D), lambda b, s: (b, 0, s % n, 0))],
        out_specs=pl.BlockSpec((None, H, bs, D), lambda b, s: (b, 0, s, 0)),
        out_shape=jax.ShapeDtypeStruct((B, H, 2 * S, D), x.dtype),
    )(x)


def _attention_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    qi, t = pl.program_id(1), pl.program_id(2)
    ki = qi - (WIN - 1) + t
    H, bq, D = q_ref.shape
    bk = k_ref.shape[1]

    @pl.when(t == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki >= 0)
    def _():
        s = jnp.einsum("hqd,hkd->hqk", q_ref[...], k_ref[...], preferred_element_type=jnp.float32) * scale
        row = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (H, bq, bk), 1)
        col = ki * bk + jax.lax.broadcasted_iota(jnp.int32, (H, bq, bk), 2)
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=2, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=2, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.einsum("hqk,hkd->hqd", p.astype(v_ref.dtype), v_ref[...],
                                                         preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(t == WIN - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v):
    B, H, S, D = q.shape
    bq, bk = _tile(S, 128), _tile(S, 128)
    nk = S // bk
    scale = 1.0 / (float(D) ** 0.5)
    k2, v2 = _doubled(k, bk), _doubled(v, bk)

    def kv_map(b, i, t):
        kb = jnp.maximum(i - (WIN - 1) + t, 0)
        return (b, 0, jnp.where(kb == 0, kb + nk, kb), 0)

    q_spec = pl.BlockSpec((None, H, bq, D), lambda b, i, t: (b, 0, i, 0))
    kv_spec = pl.BlockSpec((None, H, bk, D), kv_map)
    return pl.pallas_call(
        lambda *r: _attention_block(*r, scale=scale),
        grid=(B, S // bq, WIN),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((H, bq, 1), jnp.float32), pltpu.VMEM((H, bq, 1), jnp.float32),
                        pltpu.VMEM((H, bq, D), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024),
    )(q, k2, v2)
