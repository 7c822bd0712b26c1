import jax
import jax.numpy as jnp

GROUPS = 32
EPS = 1e-5


def reference(x, weight, lin_bias, gn_weight, gn_bias, multiply_weight):
    # y = torch.group_norm(torch.linear(x, weight, lin_bias), 32, gn_weight, gn_bias, 1e-5)
    # y = y * sigmoid(y); y = y * multiply_weight; y * sigmoid(y)
    m, n = x.shape[0], weight.shape[0]
    h = jnp.matmul(x, weight.T) + lin_bias
    hg = h.reshape(m, GROUPS, n // GROUPS)
    mean = jnp.mean(hg, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(hg - mean), axis=2, keepdims=True)  # biased
    g = ((hg - mean) / jnp.sqrt(var + EPS)).reshape(m, n) * gn_weight + gn_bias
    u = g * jax.nn.sigmoid(g)
    v = u * multiply_weight
    return v * jax.nn.sigmoid(v)
