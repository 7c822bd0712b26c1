import jax
import jax.numpy as jnp


def reference(q, kv_pages, page_table, q_lens, context_lens):
    # Ragged paged attention (mixed decode + prefill, GQA), float32.
    # q: [T, HQ, D] new tokens packed in sequence order; kv_pages: [P, PS, HK, 2, D] (k at
    # [..., 0, :], v at [..., 1, :]); page_table: [S, PPS]; q_lens: [NP] (prefill sequences);
    # context_lens: [S]. Sequences 0 .. ND-1 decode one token, sequence ND + j prefills q_lens[j].
    # Token i of sequence s sits at position ctx_s + i and attends to positions 0 .. ctx_s + i.
    # Dtypes as 7p_Ragged_Paged_Attention: bfloat16 q and pages; scores and softmax in float32 (the
    # products of bfloat16 values are exact), the probabilities rounded to bfloat16 for P.V, the
    # output rounded to the inputs' dtype.
    dtype = q.dtype
    q, kv_pages = q.astype(jnp.float32), kv_pages.astype(jnp.float32)
    T, HQ, D = q.shape
    _, PS, HK, _, _ = kv_pages.shape
    S, PPS = page_table.shape
    NP = q_lens.shape[0]
    ND = S - NP
    G = HQ // HK
    L = PPS * PS
    seq_q = jnp.concatenate([jnp.ones((ND,), jnp.int32), q_lens.astype(jnp.int32)])   # new tokens per sequence
    seq_end = jnp.cumsum(seq_q)
    seq_start = seq_end - seq_q
    tok = jnp.arange(T, dtype=jnp.int32)
    tok_seq = jnp.sum((seq_end[None, :] <= tok[:, None]).astype(jnp.int32), axis=1)  # sequence of each token
    tok_last = context_lens.astype(jnp.int32)[tok_seq] + tok - seq_start[tok_seq]     # last visible position
    qg = q.reshape(T, HK, G, D)
    scale = 1.0 / (float(D) ** 0.5)
    pos = jnp.arange(L, dtype=jnp.int32)

    # One sequence at a time (a scan: one compiled body): all of its L = PPS * PS page slots
    # against every token; only its own tokens keep the result. Positions past a token's last
    # visible one (including page slots past kv_len) get -inf, i.e. exactly zero weight, so the
    # softmax equals the torch reference's over the sequence's kv_len positions.
    def one_sequence(out, s):
        kv = kv_pages[page_table[s]].reshape(L, HK, 2, D)
        k, v = kv[:, :, 0, :], kv[:, :, 1, :]                                   # [L, HK, D]
        sc = jnp.einsum("thgd,lhd->thgl", qg, k) * scale                          # [T, HK, G, L]
        mine = tok_seq == s
        visible = (pos[None, :] <= tok_last[:, None]) | ~mine[:, None]           # no empty rows
        sc = jnp.where(visible[:, None, None, :], sc, -jnp.inf)
        p = jax.nn.softmax(sc, axis=-1).astype(dtype).astype(jnp.float32)
        o = jnp.einsum("thgl,lhd->thgd", p, v).reshape(T, HQ, D)
        return jnp.where(mine[:, None, None], o, out), None

    out, _ = jax.lax.scan(one_sequence, jnp.zeros_like(q), jnp.arange(S, dtype=jnp.int32))
    return out.astype(dtype)
