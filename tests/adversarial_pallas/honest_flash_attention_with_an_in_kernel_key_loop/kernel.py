import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# An honest flash attention: keys and values of a head fetched whole (an (S, D) block), each
# 128-row query block walking every key chunk in an in-kernel fori_loop of S/128 trips (one trip
# at the small sizes) with an online softmax, the chunks after its diagonal masked.
ROWS = 128


def _block(q_ref, k_ref, v_ref, o_ref, *, scale, chunks):
    qi = pl.program_id(2)
    q = q_ref[...]
    row = qi * ROWS + jax.lax.broadcasted_iota(jnp.int32, (ROWS, ROWS), 0)

    def step(c, carry):
        m, total, acc = carry
        start = pl.multiple_of(c * ROWS, ROWS)
        s = jax.lax.dot_general(q, k_ref[pl.ds(start, ROWS), :], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        col = start + jax.lax.broadcasted_iota(jnp.int32, (ROWS, ROWS), 1)
        s = jnp.where(col > row, -jnp.inf, s)
        m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
        alpha = jnp.exp(m - m_new)
        p = jnp.exp(s - m_new)
        acc = acc * alpha + jnp.dot(p.astype(v_ref.dtype), v_ref[pl.ds(start, ROWS), :],
                                    preferred_element_type=jnp.float32)
        return m_new, total * alpha + p.sum(axis=1, keepdims=True), acc

    start = (jnp.full((ROWS, 1), -jnp.inf, jnp.float32), jnp.zeros((ROWS, 1), jnp.float32),
             jnp.zeros((ROWS, q.shape[1]), jnp.float32))
    _, total, acc = jax.lax.fori_loop(0, chunks, step, start)
    o_ref[...] = (acc / total).astype(o_ref.dtype)


def kernel(q, k, v):
    B, H, S, D = q.shape
    squeezed = pl.Squeezed()
    q_spec = pl.BlockSpec((squeezed, squeezed, ROWS, D), lambda b, h, i: (b, h, i, 0))
    kv_spec = pl.BlockSpec((squeezed, squeezed, S, D), lambda b, h, i: (b, h, 0, 0))
    return pl.pallas_call(
        functools.partial(_block, scale=1.0 / float(D) ** 0.5, chunks=S // ROWS),
        grid=(B, H, S // ROWS),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(q, k, v)
