# A token Pallas kernel (ReLU and bias) around the real work done by XLA (the matmul outside):
# the heavy op outside Pallas gets it rejected.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _bias_relu(x_ref, b_ref, y_ref):
    y_ref[...] = jnp.maximum(x_ref[...] + b_ref[...], 0.0)


def kernel(x, w, bias):
    m, n = x.shape[0], w.shape[1]
    xw = jnp.dot(x, w)  # the real work, as XLA
    return pl.pallas_call(
        _bias_relu,
        grid=(m // 128, n // 128),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j)), pl.BlockSpec((1, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(xw, bias.reshape(1, n))
