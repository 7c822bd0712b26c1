import jax.numpy as jnp


def reference(x, weight, bias):
    # y = torch.linear(x, weight, bias); y * 0.5 + y.clone()
    y = jnp.dot(x, weight.T) + bias
    original = y
    y = y * 0.5
    return y + original
