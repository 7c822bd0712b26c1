import jax.numpy as jnp


def reference(q, k, v):
    # RetNet parallel retention, the torch reference's formula step by step, with 15p_RetNet_Retention's
    # dtypes: bfloat16 q, k, v; scores, decay and normalization in float32; the normalized weights
    # rounded to bfloat16 for the product with v; the output in bfloat16.
    dtype = q.dtype
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    _, H, S, DK = q.shape
    h = jnp.arange(H, dtype=q.dtype)
    gamma = 1.0 - jnp.power(jnp.float32(2.0), -5.0 - h)          # 1 - 2^(-5-h), exact
    pos = jnp.arange(S, dtype=q.dtype)
    dist = pos[:, None] - pos[None, :]                            # n - m
    causal = dist >= 0.0
    powed = jnp.exp(jnp.log(gamma)[:, None, None] * jnp.maximum(dist, 0.0)[None, :, :])
    decay = jnp.where(causal[None, :, :], powed, jnp.zeros_like(powed))   # [H, S, S]
    scores = jnp.matmul(q, jnp.swapaxes(k, 2, 3)) * (1.0 / (float(DK) ** 0.5))
    scores = scores * decay[None, :, :, :]
    denom = jnp.maximum(jnp.sum(jnp.abs(scores), axis=-1, keepdims=True), 1.0)
    weights = (scores / denom).astype(dtype).astype(jnp.float32)
    return jnp.matmul(weights, v).astype(dtype)
