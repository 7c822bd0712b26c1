import jax
import jax.numpy as jnp


def reference(x, wq, scale, bias):
    # dequantize the int8 weight (held in int32) per output channel, then an nn.Linear:
    # y = x @ (wq * scale[:, None]).T + bias
    w = wq.astype(jnp.float32) * scale[:, None]
    return jnp.dot(x, w.T, precision=jax.lax.Precision.HIGHEST) + bias
