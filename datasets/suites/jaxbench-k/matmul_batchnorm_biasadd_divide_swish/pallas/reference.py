import jax
import jax.numpy as jnp

EPS = 1e-5


def reference(x, weight, bn_weight, bn_bias, bias):
    # torch.matmul(x, weight.t()), training-mode batch_norm (batch statistics over the M rows,
    # biased variance, eps 1e-5, affine), + bias (shape [1]), / 1.0, then y * sigmoid(y).
    h = jnp.dot(x, weight.T)
    mean = jnp.mean(h, axis=0)
    var = jnp.mean(jnp.square(h - mean), axis=0)
    y = (h - mean) * jax.lax.rsqrt(var + EPS) * bn_weight + bn_bias
    y = y + bias
    y = y / 1.0
    return y * jax.nn.sigmoid(y)
