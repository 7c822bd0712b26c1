# The starter's causal attention with a relative-position bias, its decisions as knobs
# (pallas.json "knobs"; an episode's `knobs` action prepends one `NAME = value` line per knob). The
# score tiles stay 128 x 128 (the bias window trick below needs bq == bk == 128); what changes is
# how many (batch, head) pairs one grid step carries, a whole dimension of the task, so every
# setting's full-size program is proven the checked one:
#   STEP  "pair": one batch entry and one head a grid step (the starter's; 262,144 steps at the
#         full size); "batch": the whole batch in one step, whose B score tiles share one bias tile
#         (the bias depends on the head and the distance, not on the batch entry), so its rolls are
#         paid once for B tiles, B times fewer steps; "heads": every head in one step, the products
#         batched over heads and the bias built for all heads at once, H times fewer steps
# Tried and left out: the whole batch and every head in one step (4 x 64 tiles of 128 x 128): its
# deviceless compile for v5e failed after 10 minutes.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK = 128  # query rows and keys per block; the bias window trick below relies on bq == bk == 128


def _scores(q, k):
    # (..., 128, D) x (..., 128, D) -> (..., 128, 128) float32; a batched product over the leading
    # dims flattened into one (Mosaic's dot takes one batch dim)
    if q.ndim == 2:
        return jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    lead = q.shape[:-2]
    q3, k3 = q.reshape(-1, *q.shape[-2:]), k.reshape(-1, *k.shape[-2:])
    s = jax.lax.dot_general(q3, k3, (((2,), (2,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    return s.reshape(*lead, *s.shape[-2:])


def _weighted(p, v):
    # (..., 128, 128) x (..., 128, D) -> (..., 128, D) float32
    if p.ndim == 2:
        return jnp.dot(p, v, preferred_element_type=jnp.float32)
    lead = p.shape[:-2]
    p3, v3 = p.reshape(-1, *p.shape[-2:]), v.reshape(-1, *v.shape[-2:])
    o = jax.lax.dot_general(p3, v3, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    return o.reshape(*lead, *o.shape[-2:])


def _flex_block(q_ref, k_ref, v_ref, lo_ref, hi_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    # Grid (b, h, qi, ki), ki innermost: one (128, D) query block against one (128, D) key/value
    # block with online softmax state (running max m, sum l, unnormalized output acc) in scratch.
    # With STEP "batch" or "heads" the blocks carry a leading batch or head dim.
    qi, ki = pl.program_id(2), pl.program_id(3)
    n = BLOCK

    @pl.when(ki == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki <= qi)  # causal: later key blocks contribute nothing
    def _():
        s = _scores(q_ref[...], k_ref[...]) * scale
        # Relative-position bias of this tile: bias[r, c] = table[128 (qi - ki) + r - c].
        # lo/hi are the two 128-wide chunks of the reversed, zero-padded table that hold every
        # distance the tile needs: window[t] = table[128 (qi - ki) + 127 - t]. Broadcast the
        # window to all rows and roll row r by 129 + r (mod 256), so that
        # rolled[r, c] = window[c + 127 - r] = table[128 (qi - ki) + r - c]. The per-row shift r
        # is applied bit by bit (roll everything by 2^b, keep it in the rows whose bit b is set):
        # seven plain rolls instead of one per row. With every head in the step the window is
        # (H, 1, 256) and the rolls act on (H, 128, 256), one bias tile per head.
        window = jnp.concatenate([lo_ref[...], hi_ref[...]], axis=-1)          # (..., 1, 256)
        lanes = window.ndim - 1
        rows = pltpu.roll(jnp.broadcast_to(window, (*window.shape[:-2], n, 2 * n)), 2 * n - (n - 1), lanes)
        r = jax.lax.broadcasted_iota(jnp.int32, rows.shape, lanes - 1)
        for bit in range(n.bit_length() - 1):
            rows = jnp.where(((r >> bit) & 1) == 1, pltpu.roll(rows, 1 << bit, lanes), rows)
        s = s + rows[..., :n]   # a whole-batch step: the one bias tile broadcast over the batch
        row = qi * n + jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        col = ki * n + jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=-1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + _weighted(p.astype(v_ref.dtype), v_ref[...])
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(3) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k, v, bias_table):
    B, H, S, D = q.shape
    n = BLOCK
    nb = S // n
    scale = 1.0 / (float(D) ** 0.5)
    # Reversed table plus one zero block: rev[h, t] = bias_table[h, S - 1 - t] for t < S, and 0
    # for the 128 padding entries (distances < 0, which the causal mask removes anyway). Viewed
    # [H, 1, S + 128] so a (1, 128) chunk is a legal block (its last two dims are 1 = full, 128).
    rev = jnp.concatenate([jnp.flip(bias_table, axis=1), jnp.zeros((H, n), bias_table.dtype)], axis=1)
    rev = rev.reshape(H, 1, S + n)
    sq = pl.Squeezed()
    # a squeezed dim walks the grid (the starter's); a whole one is a single grid step (index 0)
    bb, gb = (B, 1) if STEP == "batch" else (sq, B)
    bh, gh = (H, 1) if STEP == "heads" else (sq, H)
    lead = tuple(d for d in (bb, bh) if d is not sq)
    q_spec = pl.BlockSpec((bb, bh, n, D), lambda b, h, i, j: (b, h, i, 0))
    kv_spec = pl.BlockSpec((bb, bh, n, D), lambda b, h, i, j: (b, h, j, 0))
    # The tile (qi, ki <= qi) needs rev[S - 128 - 128 (qi - ki) + t], t < 256: chunks
    # nb - 1 - (qi - ki) and the one after it. Skipped tiles (ki > qi) clamp to the last chunks.
    lo_spec = pl.BlockSpec((bh, 1, n), lambda b, h, i, j: (h, 0, nb - 1 - jnp.maximum(i - j, 0)))
    hi_spec = pl.BlockSpec((bh, 1, n), lambda b, h, i, j: (h, 0, nb - jnp.maximum(i - j, 0)))
    body = lambda *refs: _flex_block(*refs, scale=scale)
    batched = STEP != "pair"
    return pl.pallas_call(
        body,
        grid=(gb, gh, nb, nb),
        in_specs=[q_spec, kv_spec, kv_spec, lo_spec, hi_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((*lead, n, 1), jnp.float32), pltpu.VMEM((*lead, n, 1), jnp.float32),
                        pltpu.VMEM((*lead, n, D), jnp.float32)],
        # The starter's blocks fit the default scoped VMEM; a step over all 64 heads holds 2 MiB
        # q/k/v/o blocks (double-buffered) and 4-8 MiB float32 score and bias tiles.
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024) if batched else None,
    )(q, k, v, rev, rev)
