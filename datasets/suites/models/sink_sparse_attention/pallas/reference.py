import jax
import jax.numpy as jnp


def reference(q, k, v):
    # Attention sink + sliding window (StreamingLLM): query i sees key j when j <= i and
    # (j < SINK or i - j < WINDOW); invisible scores are -inf before the softmax.
    S, D = q.shape[1], q.shape[2]
    sink, window = 4, 128
    scale = 1.0 / (float(D) ** 0.5)
    hi = jax.lax.Precision.HIGHEST
    scores = jnp.einsum("hid,hjd->hij", q, k, precision=hi) * scale
    i = jnp.arange(S)[:, None]
    j = jnp.arange(S)[None, :]
    visible = (j <= i) & ((j < sink) | (i - j < window))
    scores = jnp.where(visible[None], scores, -jnp.inf)
    p = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("hij,hjd->hid", p, v, precision=hi)
