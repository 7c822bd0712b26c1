import jax.numpy as jnp

EPS = 1e-5


def reference(x, y, weight, bias):
    # h = torch.linear(x, weight, bias); InstanceNorm2d on [M, 1, 1, N] normalizes each row over
    # its N features (biased variance, eps 1e-5, no affine); then (h + y) * y
    h = jnp.matmul(x, weight.T) + bias
    mean = jnp.mean(h, axis=1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=1, keepdims=True)
    hn = (h - mean) / jnp.sqrt(var + EPS)
    return (hn + y) * y
