import jax.numpy as jnp


def reference(q, k, v):
    # RetNet parallel retention, the torch reference's formula step by step (float32).
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
    return jnp.matmul(scores / denom, v)
