import jax
import jax.numpy as jnp


def reference(x, w):
    # x * rsqrt(mean(x^2 over the last dim) + 1e-5) * w, float32 throughout.
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + 1e-5) * w
