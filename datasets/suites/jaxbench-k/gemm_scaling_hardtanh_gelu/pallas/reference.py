import jax
import jax.numpy as jnp


def reference(x, weight, bias):
    # torch.gelu(torch.hardtanh(torch.linear(x, weight, bias) * 0.5, -2.0, 2.0)), exact (erf) GELU.
    y = jnp.dot(x, weight.T) + bias
    y = y * 0.5
    y = jnp.clip(y, -2.0, 2.0)
    return jax.nn.gelu(y, approximate=False)
