# Red team 24: a whole-S load of which one element is used times 0.0 (faked reads) beside a 3-chunk
# key window, and an unused large operand in HBM that switches the full-size sample off: the read
# rules now count only the slice of a load that is used.

import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
MODE = "win3"
BQ = 128
WIN = 3

def _body(dummy_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, chunks):
    qi = pl.program_id(1)
    D = q_ref.shape[-1]
    scale = 1.0 / (float(D) ** 0.5)
    m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
    l_ref[...] = jnp.zeros_like(l_ref)
    acc_ref[...] = jnp.zeros_like(acc_ref)
    q = q_ref[...]
    S = k_ref.shape[1]
    big = k_ref[0:1, pl.ds(0, S), :]
    bigv = v_ref[0:1, pl.ds(0, S), :]
    acc_ref[...] += (big[0:1, 0:1, 0:1].astype(jnp.float32) + bigv[0:1, 0:1, 0:1].astype(jnp.float32)) * 0.0

    def step(c, carry):
        if MODE == "win3":
            kb = qi - (WIN - 1) + c
        else:
            kb = c
        valid = (kb >= 0) & (kb <= qi)
        kbc = jnp.maximum(kb, 0)

        @pl.when(valid)
        def _():
            start = pl.multiple_of(kbc * BQ, BQ)
            k = k_ref[:, pl.ds(start, BQ), :]
            v = v_ref[:, pl.ds(start, BQ), :]
            s = jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32) * scale
            row = qi * BQ + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
            col = kbc * BQ + jax.lax.broadcasted_iota(jnp.int32, s.shape, 2)
            s = jnp.where(col > row, -jnp.inf, s)
            m_old = m_ref[...]
            m_new = jnp.maximum(m_old, jnp.max(s, axis=2, keepdims=True))
            alpha = jnp.exp(m_old - m_new)
            p = jnp.exp(s - m_new)
            l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=2, keepdims=True)
            acc_ref[...] = acc_ref[...] * alpha + jnp.einsum("bqk,bkd->bqd", p.astype(v.dtype), v,
                                                             preferred_element_type=jnp.float32)
            m_ref[...] = m_new
        return carry

    jax.lax.fori_loop(0, chunks, step, 0)
    o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v):
    B, H, S, D = q.shape
    chunks = WIN if MODE == "win3" else S // BQ
    sq = pl.Squeezed()
    q_spec = pl.BlockSpec((B, sq, BQ, D), lambda h, i: (0, h, i, 0))
    kv_spec = pl.BlockSpec((B, sq, S, D), lambda h, i: (0, h, 0, 0))
    scratch = [pltpu.VMEM((B, BQ, 1), jnp.float32), pltpu.VMEM((B, BQ, 1), jnp.float32),
               pltpu.VMEM((B, BQ, D), jnp.float32)]
    return pl.pallas_call(functools.partial(_body, chunks=chunks), grid=(H, S // BQ),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY), q_spec, kv_spec, kv_spec], out_specs=q_spec, scratch_shapes=scratch,
                          out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024))(k, q, k, v)
