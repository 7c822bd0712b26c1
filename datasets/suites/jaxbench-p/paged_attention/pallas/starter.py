import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _last_page(length, page_size):
    # index (within the sequence) of the page that holds position length - 1 (length >= 1)
    return jax.lax.div(length - 1, page_size)


def _paged_block(page_table_ref, lengths_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref,
                 *, scale, page_size):
    # Grid (b, kv head h, page p), p innermost. Scalar-prefetched page_table / lengths (SMEM)
    # steer the k/v index maps to the physical page. q_ref: the (G, D) query heads that read kv
    # head h; k_ref / v_ref: one page's (PS, D) keys / values of kv head h. Online softmax over
    # the pages; positions >= lengths[b] are masked, pages past the last one are skipped.
    b, p = pl.program_id(0), pl.program_id(2)
    length = lengths_ref[b]
    G = q_ref.shape[0]

    @pl.when(p == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(p * page_size < length)
    def _():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale      # (G, PS)
        pos = p * page_size + jax.lax.broadcasted_iota(jnp.int32, (G, page_size), 1)
        s = jnp.where(pos >= length, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        e = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(e, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(e.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(p == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k_pages, v_pages, page_table, lengths):
    B, HQ, D = q.shape
    P, PS, HK, _ = k_pages.shape
    PPS = page_table.shape[1]
    G = HQ // HK
    # [P, PS, HK, D] viewed as [P, PS, HK * D] (a free reshape): one page of one kv head is then
    # a (PS, D) block, picked by block index h along the last axis.
    k2 = k_pages.reshape(P, PS, HK * D)
    v2 = v_pages.reshape(P, PS, HK * D)
    sq = pl.Squeezed()

    def kv_map(b, h, p, pt, ln):
        # Pages past the sequence's last one re-point at the last one: the block index repeats,
        # so the pipeline does not fetch them again (the kernel skips them).
        return pt[b, jnp.minimum(p, _last_page(ln[b], PS))], 0, h

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(B, HK, PPS),
        in_specs=[pl.BlockSpec((sq, G, D), lambda b, h, p, pt, ln: (b, h, 0)),
                  pl.BlockSpec((sq, PS, D), kv_map),
                  pl.BlockSpec((sq, PS, D), kv_map)],
        out_specs=pl.BlockSpec((sq, G, D), lambda b, h, p, pt, ln: (b, h, 0)),
        scratch_shapes=[pltpu.VMEM((G, 1), jnp.float32), pltpu.VMEM((G, 1), jnp.float32),
                        pltpu.VMEM((G, D), jnp.float32)],
    )
    body = functools.partial(_paged_block, scale=1.0 / (float(D) ** 0.5), page_size=PS)
    return pl.pallas_call(
        body,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(page_table.astype(jnp.int32), lengths.astype(jnp.int32), q, k2, v2)
