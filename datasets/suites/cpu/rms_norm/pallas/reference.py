import jax
import jax.numpy as jnp


def reference(x, w):
    # x * rsqrt(mean(x^2 over the last dim) + 1e-6) * w, float32
    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + 1e-6) * w
