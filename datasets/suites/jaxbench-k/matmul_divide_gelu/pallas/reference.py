import jax
import jax.numpy as jnp


def reference(x, weight, bias):
    # torch.gelu(torch.linear(x, weight, bias) / 10.0), exact (erf) GELU.
    y = jnp.dot(x, weight.T) + bias
    y = y / 10.0
    return jax.nn.gelu(y, approximate=False)
