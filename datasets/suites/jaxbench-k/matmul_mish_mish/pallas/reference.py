import jax
import jax.numpy as jnp


def _mish(v):
    # torch.mish: v * tanh(softplus(v)), softplus(v) = log(1 + exp(v)).
    return v * jnp.tanh(jax.nn.softplus(v))


def reference(x, weight, bias):
    # torch.mish(torch.mish(torch.linear(x, weight, bias)))
    y = jnp.dot(x, weight.T) + bias
    return _mish(_mish(y))
