import jax
import jax.numpy as jnp


def reference(q, k_pages, v_pages, page_table, lengths):
    # q: [B, HQ, D]; k_pages, v_pages: [P, PS, HK, D]; page_table: [B, PPS]; lengths: [B]
    # bfloat16 q and pages (6p_Paged_Attention's dtype): scores and softmax in float32, the
    # probabilities rounded to bfloat16 for P.V as a TPU kernel feeds the MXU, the output rounded to the
    # inputs' dtype.
    dtype = q.dtype
    q, k_pages, v_pages = (x.astype(jnp.float32) for x in (q, k_pages, v_pages))
    B, HQ, D = q.shape
    PS, HK = k_pages.shape[1], k_pages.shape[2]
    PPS = page_table.shape[1]
    L = PPS * PS
    G = HQ // HK
    pages = page_table.astype(jnp.int32).reshape(-1)
    # position t of sequence b is page page_table[b, t // PS], slot t % PS
    k = k_pages[pages].reshape(B, L, HK, D).transpose(0, 2, 3, 1)   # [B, HK, D, L]
    v = v_pages[pages].reshape(B, L, HK, D).transpose(0, 2, 1, 3)   # [B, HK, L, D]
    qg = q.reshape(B, HK, G, D)                                     # query head h = kv head h // G, member h % G
    scale = 1.0 / (float(D) ** 0.5)
    s = jnp.matmul(qg, k) * scale                                   # [B, HK, G, L]
    pos = jnp.arange(L)
    past_end = pos[None, :] >= lengths.astype(jnp.int32)[:, None]   # [B, L]
    s = jnp.where(past_end[:, None, None, :], -jnp.inf, s)
    p = jax.nn.softmax(s, axis=-1).astype(dtype).astype(jnp.float32)
    o = jnp.matmul(p, v)                                            # [B, HK, G, D]
    return o.reshape(B, HQ, D).astype(dtype)
