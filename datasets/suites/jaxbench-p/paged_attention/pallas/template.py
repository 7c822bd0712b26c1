# The starter's paged attention with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob).
#   FETCH  how a sequence's pages reach VMEM:
#          "head_page" one page of one kv head per grid step (the starter's: grid (B, HK, PPS),
#                      16,384 steps at the full size), the Pallas pipeline fetching the page the
#                      scalar-prefetched page table names;
#          "page"      one page of every kv head per grid step (grid (B, PPS): 2,048 steps at
#                      the full size, each copying the page's contiguous (PS, HK * D) rows once):
#                      the queries laid out block-diagonally over the kv heads' lanes, so one
#                      product scores every query head against its own kv head (HK times the
#                      starter's MXU work, on zeros) with no loop over the heads;
#          "sequence"  one grid step per (sequence, kv head) (128 at the full size): the page pool
#                      stays in HBM and the kernel starts the copies of all the sequence's pages
#                      (the pages up to its last one; a loop of PPS trips, each copy guarded) into a
#                      (PPS, PS, D) VMEM buffer at once, then folds page after page into the online
#                      softmax, waiting for each page's copy just before it, so the later copies
#                      overlap the earlier pages' compute.
#          "sequence_pages" one grid step per sequence (16 at the full size): the page pool stays in HBM
#                      in its own [P, PS, HK, D] layout (no relayout of the pool before the kernel)
#                      and the kernel copies each of the sequence's PPS pages whole, every kv head's
#                      rows of it (one DMA a page, a fixed number a step, all signalling one
#                      semaphore), waits once for all of them, then runs one softmax pass over the
#                      sequence's PPS * PS * HK rows for every query head, the rows of other kv heads
#                      and past the length masked (HK times the MXU and softmax work, on masked
#                      columns; no online rescaling, no loop over pages or heads in the compute).
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


def _sequence_block(page_table_ref, lengths_ref, q_ref, k_hbm, v_hbm, o_ref, k_buf, v_buf, sems,
                    *, scale, page_size):
    # Grid (b, kv head h). The copies of the sequence's pages (page p of kv head h into slot p of
    # k_buf / v_buf) all start first; then the online softmax walks the pages in order, each
    # waiting for its own copy. Pages past the last one are neither copied nor computed.
    b, h = pl.program_id(0), pl.program_id(1)
    length = lengths_ref[b]
    last = _last_page(length, page_size)
    pages = k_buf.shape[0]
    G, D = q_ref.shape

    def copies(p):
        page = page_table_ref[b, p]
        # one semaphore per copy: a wait on a shared one could be met by a later page's bytes
        return (pltpu.make_async_copy(k_hbm.at[page, :, pl.ds(h * D, D)], k_buf.at[p], sems.at[0, p]),
                pltpu.make_async_copy(v_hbm.at[page, :, pl.ds(h * D, D)], v_buf.at[p], sems.at[1, p]))

    def start(p, carry):
        @pl.when(p <= last)
        def _():
            for copy in copies(p):
                copy.start()
        return carry

    jax.lax.fori_loop(0, pages, start, 0)
    q = q_ref[...]

    def fold(p, state):
        m_old, l_old, acc_old = state

        def step():
            for copy in copies(p):
                copy.wait()
            s = jax.lax.dot_general(q, k_buf[p], (((1,), (1,)), ((), ())),
                                    preferred_element_type=jnp.float32) * scale      # (G, PS)
            pos = p * page_size + jax.lax.broadcasted_iota(jnp.int32, (G, page_size), 1)
            s = jnp.where(pos >= length, -jnp.inf, s)
            m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
            alpha = jnp.exp(m_old - m_new)
            e = jnp.exp(s - m_new)
            return (m_new, l_old * alpha + jnp.sum(e, axis=1, keepdims=True),
                    acc_old * alpha + jnp.dot(e.astype(v_buf.dtype), v_buf[p], preferred_element_type=jnp.float32))

        return jax.lax.cond(p <= last, step, lambda: state)

    init = (jnp.full((G, 1), -jnp.inf, jnp.float32), jnp.zeros((G, 1), jnp.float32),
            jnp.zeros((G, D), jnp.float32))
    _, l, acc = jax.lax.fori_loop(0, pages, fold, init)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def _sequence_pages_block(page_table_ref, lengths_ref, q_ref, k_hbm, v_hbm, o_ref, k_buf, v_buf, sems,
                          *, scale, page_size):
    # Grid (b,): the whole sequence a step. Page p's (PS, HK, D) rows, all kv heads, are one
    # contiguous tile-aligned copy into slot p of k_buf / v_buf; every page is copied (PPS copies a
    # step whatever the length: the wait below is for the whole buffer, so its size is fixed) and
    # the positions past the length masked. One wait per buffer: the PPS copies signal one
    # semaphore and the wait is for the bytes of all of them (a wait per page in a loop would be
    # priced as uncovered latency, llo_schedule cannot play a loop nested in the grid loop).
    # Viewed as (PPS * PS * HK, D), row r is position r // HK of kv head r % HK: one product
    # scores every query head against every row, and a query head keeps only its own kv head's
    # rows (rem(r, HK) == its head // G) up to the length (r < length * HK).
    b = pl.program_id(0)
    length = lengths_ref[b]
    pages, _, HK, D = k_buf.shape
    HQ = q_ref.shape[0]

    def start(p, carry):
        page = page_table_ref[b, p]
        pltpu.make_async_copy(k_hbm.at[page], k_buf.at[p], sems.at[0]).start()
        pltpu.make_async_copy(v_hbm.at[page], v_buf.at[p], sems.at[1]).start()
        return carry

    # unrolled 8 a trip: the page-table reads and address arithmetic of eight copies share bundles
    jax.lax.fori_loop(0, pages, start, 0, unroll=8)
    # one descriptor the size of the whole buffer: its wait is for all PPS copies' bytes
    pltpu.make_async_copy(k_hbm.at[pl.ds(0, pages)], k_buf, sems.at[0]).wait()
    rows = pages * page_size * HK
    k = k_buf[...].reshape(rows, D)
    s = jax.lax.dot_general(q_ref[...], k, (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32) * scale      # (HQ, rows)
    r = jax.lax.broadcasted_iota(jnp.int32, (HQ, rows), 1)
    head = jax.lax.broadcasted_iota(jnp.int32, (HQ, rows), 0)
    # lax.rem / lax.div: the indices are non-negative, no floor correction to decide on
    own = jax.lax.rem(r, HK) == jax.lax.div(head, HQ // HK)
    s = jnp.where(own & (r < length * HK), s, -jnp.inf)
    m = jnp.max(s, axis=1, keepdims=True)
    e = jnp.exp(s - m)
    l = jnp.sum(e, axis=1, keepdims=True)
    pltpu.make_async_copy(v_hbm.at[pl.ds(0, pages)], v_buf, sems.at[1]).wait()
    v = v_buf[...].reshape(rows, D)
    acc = jnp.dot(e.astype(v.dtype), v, preferred_element_type=jnp.float32)    # (HQ, D)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def _page_block(page_table_ref, lengths_ref, q_ref, k_ref, v_ref, own_ref, pick_ref, o_ref, m_ref, l_ref,
                acc_ref, *, scale, page_size):
    # Grid (b, page p), p innermost: one page of every kv head per step (k_ref / v_ref: the
    # page's (PS, HK * D) rows, one contiguous copy). q_ref: the sequence's (HQ, HK * D) queries
    # laid out block-diagonally (query head i's D values in the lanes of its kv head i // G, zeros
    # elsewhere), so one product gives every head's scores against its own kv head, (HQ, PS), and
    # one P.V product every head's (HQ, HK * D) sums, of which query head i's are in the lanes of
    # its kv head. The zeros add nothing: the sums are the starter's. At the end own_ref (1 in a
    # query head's own lanes) keeps those and the product with pick_ref ((HK * D, D): lane
    # h * D + d to column d) moves them to (HQ, D): one nonzero term a sum, so exact.
    b, p = pl.program_id(0), pl.program_id(1)
    length = lengths_ref[b]
    HQ = q_ref.shape[0]

    @pl.when(p == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(p * page_size < length)
    def _():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale      # (HQ, PS)
        pos = p * page_size + jax.lax.broadcasted_iota(jnp.int32, (HQ, page_size), 1)
        s = jnp.where(pos >= length, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        e = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(e, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(e.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(p == pl.num_programs(1) - 1)
    def _():
        wide = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype) * own_ref[...]
        o_ref[...] = jnp.dot(wide, pick_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


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
    scale = 1.0 / (float(D) ** 0.5)

    if FETCH == "sequence":
        # The pool stays in HBM as [P, PS, HK * D] (as the starter's: its (HK, D) minor dims are
        # tiled (8, 128), so one head's rows of [P, PS, HK, D] are not a tile-aligned slice): each
        # copy takes one kv head's (PS, D) rows of one page.
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(B, HK),
            in_specs=[pl.BlockSpec((sq, G, D), lambda b, h, pt, ln: (b, h, 0)),
                      pl.BlockSpec(memory_space=pl.ANY),      # the page pool stays in HBM
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((sq, G, D), lambda b, h, pt, ln: (b, h, 0)),
            scratch_shapes=[pltpu.VMEM((PPS, PS, D), k_pages.dtype), pltpu.VMEM((PPS, PS, D), v_pages.dtype),
                            pltpu.SemaphoreType.DMA((2, PPS))],
        )
        body = functools.partial(_sequence_block, scale=scale, page_size=PS)
        return pl.pallas_call(
            body,
            grid_spec=grid_spec,
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        )(page_table.astype(jnp.int32), lengths.astype(jnp.int32), q, k2, v2)

    if FETCH == "sequence_pages":
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(B,),
            in_specs=[pl.BlockSpec((sq, HQ, D), lambda b, pt, ln: (b, 0, 0)),
                      pl.BlockSpec(memory_space=pl.ANY),      # the page pool stays in HBM, as given
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((sq, HQ, D), lambda b, pt, ln: (b, 0, 0)),
            scratch_shapes=[pltpu.VMEM((PPS, PS, HK, D), k_pages.dtype), pltpu.VMEM((PPS, PS, HK, D), v_pages.dtype),
                            pltpu.SemaphoreType.DMA((2,))],
        )
        body = functools.partial(_sequence_pages_block, scale=scale, page_size=PS)
        return pl.pallas_call(
            body,
            grid_spec=grid_spec,
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
            # a whole sequence's pages and its (HQ, PPS * PS * HK) scores: 17 MB at the full size
            compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 2**20),
        )(page_table.astype(jnp.int32), lengths.astype(jnp.int32), q, k_pages, v_pages)

    if FETCH == "page":
        # q block-diagonal, [B, HQ, HK * D]: query head i's values in kv head i // G's D lanes
        # (lax.div / lax.rem: the indices are non-negative, no floor correction to decide on)
        rows, lanes = jnp.arange(HQ)[:, None], jnp.arange(HK * D)
        own = (jax.lax.div(rows, G) == jax.lax.div(lanes, D)[None, :]).astype(q.dtype)
        pick = (jax.lax.rem(lanes, D)[:, None] == jnp.arange(D)[None, :]).astype(q.dtype)
        q_wide = jnp.tile(q, (1, 1, HK)) * own[None]

        def page_map(b, p, pt, ln):
            # as the starter's: pages past the last one name the last one (not fetched again)
            return pt[b, jnp.minimum(p, _last_page(ln[b], PS))], 0, 0

        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(B, PPS),
            in_specs=[pl.BlockSpec((sq, HQ, HK * D), lambda b, p, pt, ln: (b, 0, 0)),
                      pl.BlockSpec((sq, PS, HK * D), page_map),
                      pl.BlockSpec((sq, PS, HK * D), page_map),
                      pl.BlockSpec((HQ, HK * D), lambda b, p, pt, ln: (0, 0)),
                      pl.BlockSpec((HK * D, D), lambda b, p, pt, ln: (0, 0))],
            out_specs=pl.BlockSpec((sq, HQ, D), lambda b, p, pt, ln: (b, 0, 0)),
            scratch_shapes=[pltpu.VMEM((HQ, 1), jnp.float32), pltpu.VMEM((HQ, 1), jnp.float32),
                            pltpu.VMEM((HQ, HK * D), jnp.float32)],
        )
        body = functools.partial(_page_block, scale=scale, page_size=PS)
        return pl.pallas_call(
            body,
            grid_spec=grid_spec,
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        )(page_table.astype(jnp.int32), lengths.astype(jnp.int32), q_wide, k2, v2, own, pick)

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
    body = functools.partial(_paged_block, scale=scale, page_size=PS)
    return pl.pallas_call(
        body,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(page_table.astype(jnp.int32), lengths.astype(jnp.int32), q, k2, v2)
