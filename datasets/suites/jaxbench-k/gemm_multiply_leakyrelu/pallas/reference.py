import jax.numpy as jnp


def reference(x, weight, bias):
    # torch.leaky_relu(torch.linear(x, weight, bias) * 2.0, 0.1)
    y = (jnp.matmul(x, weight.T) + bias) * 2.0
    return jnp.where(y >= 0, y, 0.1 * y)
