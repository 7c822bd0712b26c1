import jax
import jax.numpy as jnp


def reference(x, weight, bias):
    # torch.softmax(torch.linear(x, weight, bias), 1); nn.Dropout(p=0.2) is off (identity).
    y = jnp.dot(x, weight.T) + bias
    return jax.nn.softmax(y, axis=1)
