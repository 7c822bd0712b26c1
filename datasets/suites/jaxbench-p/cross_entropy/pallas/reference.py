import jax
import jax.numpy as jnp


def reference(hidden, W, labels):
    # As 13p_Cross_Entropy: logits = hidden . W in the inputs' dtype (bfloat16: products exact, summed in
    # float32, each logit rounded to bfloat16); loss = mean_t (logsumexp_v z[t, v] - z[t, labels[t]]),
    # computed in float32 from those logits and returned in the inputs' dtype; shape [1].
    logits = jnp.dot(hidden, W, preferred_element_type=jnp.float32).astype(hidden.dtype).astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=1)
    picked = jnp.take_along_axis(logits, labels.astype(jnp.int32)[:, None], axis=1)[:, 0]
    return jnp.mean(lse - picked).reshape(1).astype(hidden.dtype)
