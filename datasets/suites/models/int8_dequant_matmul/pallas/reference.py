import jax
import jax.numpy as jnp


def reference(x, wq, scale, bias):
    # Weight-only int8 linear layer in its serving dtypes: bfloat16 activations, int8 weights
    # ([-127, 127], exact in bfloat16), float32 per-channel scales and bias. The integer-weight dot
    # sums exact products in float32; the scale and bias are applied in float32 and y is rounded to
    # the activations' dtype: y = (x . wq^T) * scale + bias.
    acc = jnp.dot(x, wq.astype(x.dtype).T, preferred_element_type=jnp.float32)
    return (acc * scale + bias).astype(x.dtype)
