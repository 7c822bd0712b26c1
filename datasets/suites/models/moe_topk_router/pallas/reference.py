import jax
import jax.numpy as jnp


def reference(x, w_router):
    # Softmax-then-top-k routing with renormalized gates (Qwen3-MoE, norm_topk_prob=True), top 8.
    # The inputs lie on power-of-two grids, so the logits are exact in float32 (see task.json).
    # bfloat16 x and w_router, as Qwen3-MoE serves them: the gate layer's logits are exact in float32
    # (the grids) and rounded to bfloat16; softmax, top-k and renormalization in float32; the gates
    # returned in bfloat16. Ties after the rounding go to the lower expert index, as before.
    logits = jnp.dot(x, w_router, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)
    logits = logits.astype(x.dtype).astype(jnp.float32)
    probs = jax.nn.softmax(logits, axis=-1)
    # the 8 largest logits, larger first; lax.top_k puts the lower index first among equal values,
    # the order of torch.sort(descending=True, stable=True)
    _, top_i = jax.lax.top_k(logits, 8)
    top_p = jnp.take_along_axis(probs, top_i, axis=1)
    top_p = top_p / jnp.sum(top_p, axis=-1, keepdims=True)
    # the selected experts in ascending expert index, each with its gate
    order = jnp.argsort(top_i, axis=-1)
    experts = jnp.take_along_axis(top_i, order, axis=1)
    gates = jnp.take_along_axis(top_p, order, axis=1)
    return gates.astype(x.dtype), experts.astype(jnp.int32)
