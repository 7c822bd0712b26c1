import jax
import jax.numpy as jnp


def reference(q, k, v):
    # Attention sink + sliding window (StreamingLLM): query i sees key j when j <= i and
    # (j < SINK or i - j < WINDOW); invisible scores are -inf before the softmax.
    # bfloat16 inputs (the workload's dtype): scores and softmax in float32 (products of bfloat16
    # values are exact), the probabilities rounded to bfloat16 for P.V as a TPU kernel feeds the MXU,
    # the output rounded to the inputs' dtype.
    dtype = q.dtype
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    S, D = q.shape[1], q.shape[2]
    sink, window = 4, 128
    scale = 1.0 / (float(D) ** 0.5)
    hi = jax.lax.Precision.HIGHEST
    scores = jnp.einsum("hid,hjd->hij", q, k, precision=hi) * scale
    i = jnp.arange(S)[:, None]
    j = jnp.arange(S)[None, :]
    visible = (j <= i) & ((j < sink) | (i - j < window))
    scores = jnp.where(visible[None], scores, -jnp.inf)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype).astype(jnp.float32)
    return jnp.einsum("hij,hjd->hid", p, v, precision=hi).astype(dtype)
