import jax
import jax.numpy as jnp


def reference(x, residual, w):
    # Llama fused residual add + RMSNorm, eps 1e-5: h = x + residual (an output too),
    # y = h * rsqrt(mean(h^2) + 1e-5) * w
    h = x + residual
    variance = jnp.mean(jnp.square(h), axis=-1, keepdims=True)
    y = h * jax.lax.rsqrt(variance + 1e-5)
    return h, y * w
