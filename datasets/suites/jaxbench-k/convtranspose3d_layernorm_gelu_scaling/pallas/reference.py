import jax
import jax.numpy as jnp

EPS = 1e-5


def reference(x, weight, ln_weight, ln_bias):
    # y = torch.conv_transpose3d(x, weight, None, stride=2, padding=1)   [N, Cout, 2D, 2H, 2W]
    # torch.gelu(torch.layer_norm(y, [Cout], ln_weight, ln_bias, 1e-5)) * 1.0   (last dim, 2W)
    # A transposed convolution is the convolution of the input dilated by the stride, padded by
    # k - 1 - p = 2, with the spatially flipped kernel and in/out channels swapped.
    rhs = jnp.flip(weight, axis=(2, 3, 4)).transpose(1, 0, 2, 3, 4)  # [Cout, Cin, 4, 4, 4]
    y = jax.lax.conv_general_dilated(x, rhs, window_strides=(1, 1, 1), padding=[(2, 2)] * 3,
                                     lhs_dilation=(2, 2, 2),
                                     dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    mean = jnp.mean(y, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=-1, keepdims=True)  # biased
    v = (y - mean) / jnp.sqrt(var + EPS) * ln_weight + ln_bias
    return jax.nn.gelu(v, approximate=False) * 1.0
