import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK = 128  # query rows and keys per block; the bias window trick below relies on bq == bk == 128


def _flex_block(q_ref, k_ref, v_ref, lo_ref, hi_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    # Grid (b, h, qi, ki), ki innermost: one (128, D) query block against one (128, D) key/value
    # block with online softmax state (running max m, sum l, unnormalized output acc) in scratch.
    qi, ki = pl.program_id(2), pl.program_id(3)
    n = BLOCK

    @pl.when(ki == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki <= qi)  # causal: later key blocks contribute nothing
    def _():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        # Relative-position bias of this tile: bias[r, c] = table[128 (qi - ki) + r - c].
        # lo/hi are the two 128-wide chunks of the reversed, zero-padded table that hold every
        # distance the tile needs: window[t] = table[128 (qi - ki) + 127 - t]. Broadcast the
        # window to all rows and roll row r by 129 + r (mod 256), so that
        # rolled[r, c] = window[c + 127 - r] = table[128 (qi - ki) + r - c]. The per-row shift r
        # is applied bit by bit (roll everything by 2^b, keep it in the rows whose bit b is set):
        # seven plain rolls instead of one per row.
        window = jnp.concatenate([lo_ref[...], hi_ref[...]], axis=1)          # (1, 256)
        rows = pltpu.roll(jnp.broadcast_to(window, (n, 2 * n)), 2 * n - (n - 1), 1)
        r = jax.lax.broadcasted_iota(jnp.int32, (n, 2 * n), 0)
        for bit in range(n.bit_length() - 1):
            rows = jnp.where(((r >> bit) & 1) == 1, pltpu.roll(rows, 1 << bit, 1), rows)
        s = s + rows[:, :n]
        row = qi * n + jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        col = ki * n + jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
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
    q_spec = pl.BlockSpec((sq, sq, n, D), lambda b, h, i, j: (b, h, i, 0))
    kv_spec = pl.BlockSpec((sq, sq, n, D), lambda b, h, i, j: (b, h, j, 0))
    # The tile (qi, ki <= qi) needs rev[S - 128 - 128 (qi - ki) + t], t < 256: chunks
    # nb - 1 - (qi - ki) and the one after it. Skipped tiles (ki > qi) clamp to the last chunks.
    lo_spec = pl.BlockSpec((sq, 1, n), lambda b, h, i, j: (h, 0, nb - 1 - jnp.maximum(i - j, 0)))
    hi_spec = pl.BlockSpec((sq, 1, n), lambda b, h, i, j: (h, 0, nb - jnp.maximum(i - j, 0)))
    body = lambda *refs: _flex_block(*refs, scale=scale)
    return pl.pallas_call(
        body,
        grid=(B, H, nb, nb),
        in_specs=[q_spec, kv_spec, kv_spec, lo_spec, hi_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((n, 1), jnp.float32), pltpu.VMEM((n, 1), jnp.float32),
                        pltpu.VMEM((n, D), jnp.float32)],
    )(q, k, v, rev, rev)
