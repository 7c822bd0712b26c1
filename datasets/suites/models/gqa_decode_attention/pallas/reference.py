import jax
import jax.numpy as jnp


def reference(q, k_cache, v_cache, lengths):
    # One GQA decode step: query head h = g_kv * G + j uses kv head g_kv; cache slots
    # s >= lengths[b] are masked with -inf before the softmax over the Smax slots.
    # bfloat16 q and cache (as served): scores and softmax in float32, the probabilities rounded to
    # bfloat16 for P.V as a TPU kernel feeds the MXU, the output rounded to the inputs' dtype.
    dtype = q.dtype
    q, k_cache, v_cache = (x.astype(jnp.float32) for x in (q, k_cache, v_cache))
    B, Hq, D = q.shape
    Hk, S = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hk
    hi = jax.lax.Precision.HIGHEST
    qg = q.reshape(B, Hk, G, D)
    scale = 1.0 / (float(D) ** 0.5)
    scores = jnp.einsum("bhgd,bhsd->bhgs", qg, k_cache, precision=hi) * scale
    empty = jnp.arange(S)[None, :] >= lengths.reshape(B, 1)  # [B, S]: slot holds no token
    scores = jnp.where(empty[:, None, None, :], -jnp.inf, scores)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype).astype(jnp.float32)
    return jnp.einsum("bhgs,bhsd->bhgd", p, v_cache, precision=hi).reshape(B, Hq, D).astype(dtype)
