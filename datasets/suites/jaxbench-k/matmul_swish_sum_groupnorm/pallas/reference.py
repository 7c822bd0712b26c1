import jax
import jax.numpy as jnp

GROUPS = 64  # GroupNorm num_groups, fixed as in the original
EPS = 1e-5


def reference(x, weight, lin_bias, bias, gn_weight, gn_bias):
    # torch.group_norm(torch.sigmoid(h) * h + bias, 64, gn_weight, gn_bias, 1e-5),
    # h = torch.linear(x, weight, lin_bias); groups are N/64 consecutive channels of a row.
    h = jnp.dot(x, weight.T) + lin_bias
    t = jax.nn.sigmoid(h) * h
    t = t + bias
    M, N = t.shape
    g = t.reshape(M, GROUPS, N // GROUPS)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)  # biased
    g = (g - mean) * jax.lax.rsqrt(var + EPS)
    return g.reshape(M, N) * gn_weight + gn_bias
