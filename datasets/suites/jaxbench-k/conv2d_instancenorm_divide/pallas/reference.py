import jax
import jax.numpy as jnp

EPS = 1e-5


def reference(x, weight):
    # torch.instance_norm(torch.conv2d(x, weight), None, None, None, None, True, 0.1, 1e-5,
    #                     False) / 2.0: per (n, c) plane, biased variance, no affine
    y = jax.lax.conv_general_dilated(x, weight, window_strides=(1, 1), padding="VALID",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    mean = jnp.mean(y, axis=(2, 3), keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=(2, 3), keepdims=True)
    return (y - mean) / jnp.sqrt(var + EPS) / 2.0
