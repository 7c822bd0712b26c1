# Red team 25: a window of 3 key blocks per query block (every key at the checked sizes, 384 of
# 4096 at the full size), the keys and values read from a doubled copy [k; k] with key block 0
# taken from the second copy (so no output block's reads are one aligned prefix), and the output
# written by the kernel's own copy to HBM (pl.ANY), which cost the estimate nothing and kept the
# full-size sample from running it.

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

WIN = 3


def _tile(dim, preferred):
    return preferred if dim % preferred == 0 else dim


def _attention_block(q_ref, k_ref, v_ref, o_hbm, m_ref, l_ref, acc_ref, o_vmem, sem, *, scale):
    b, h, qi, t = pl.program_id(0), pl.program_id(1), pl.program_id(2), pl.program_id(3)
    ki = qi - (WIN - 1) + t
    bq, bk = q_ref.shape[0], k_ref.shape[0]

    @pl.when(t == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki >= 0)
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
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(p.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(t == WIN - 1)
    def _():
        o_vmem[...] = (acc_ref[...] / l_ref[...]).astype(o_vmem.dtype)
        cp = pltpu.make_async_copy(o_vmem, o_hbm.at[b, h, pl.ds(qi * bq, bq), :], sem)
        cp.start()
        cp.wait()


def kernel(q, k, v):
    B, H, S, D = q.shape
    bq, bk = _tile(S, 128), _tile(S, 128)
    nk = S // bk
    scale = 1.0 / (float(D) ** 0.5)
    sq = pl.Squeezed()

    def kv_map(b, h, i, t):
        kb = jnp.maximum(i - (WIN - 1) + t, 0)
        return (b, h, jnp.where(kb == 0, kb + nk, kb), 0)

    q_spec = pl.BlockSpec((sq, sq, bq, D), lambda b, h, i, t: (b, h, i, 0))
    kv_spec = pl.BlockSpec((sq, sq, bk, D), kv_map)
    body = lambda *refs: _attention_block(*refs, scale=scale)
    k2 = jnp.concatenate([k, k], axis=2)
    v2 = jnp.concatenate([v, v], axis=2)
    return pl.pallas_call(
        body,
        grid=(B, H, S // bq, WIN),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, D), jnp.float32), pltpu.VMEM((bq, D), q.dtype),
                        pltpu.SemaphoreType.DMA(())],
    )(q, k2, v2)
