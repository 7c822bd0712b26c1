import jax
import jax.numpy as jnp

GROUPS = 8
EPS = 1e-5


def reference(x, weight, bias, gn_weight, gn_bias):
    # torch.mean(torch.group_norm(torch.conv3d(x, weight, bias), 8, gn_weight, gn_bias, 1e-5),
    #            dim=[1, 2, 3, 4])   -> [N]
    y = jax.lax.conv_general_dilated(x, weight, window_strides=(1, 1, 1), padding="VALID",
                                     dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    y = y + bias[None, :, None, None, None]
    n, c = y.shape[:2]
    yg = y.reshape(n, GROUPS, -1)
    mean = jnp.mean(yg, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(yg - mean), axis=2, keepdims=True)  # biased
    g = ((yg - mean) / jnp.sqrt(var + EPS)).reshape(y.shape)
    g = g * gn_weight[None, :, None, None, None] + gn_bias[None, :, None, None, None]
    return jnp.mean(g, axis=(1, 2, 3, 4))
