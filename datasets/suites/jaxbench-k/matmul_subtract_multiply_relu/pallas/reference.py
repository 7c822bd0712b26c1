import jax.numpy as jnp


def reference(x, weight, bias):
    # torch.relu((torch.linear(x, weight, bias) - 2.0) * 1.5)
    y = jnp.dot(x, weight.T) + bias
    y = y - 2.0
    y = y * 1.5
    return jnp.maximum(y, 0.0)
