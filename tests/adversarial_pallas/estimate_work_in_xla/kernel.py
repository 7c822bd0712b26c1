# Part of the work (the exponential) moved out of the kernel into an XLA op, within what the
# structure check allows: the estimate must count it (XLA's model and the op's static profile),
# not only the kernel's cycles.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, e_ref, b_ref, y_ref):
    a, e = a_ref[...], e_ref[...]
    y_ref[...] = a * e / (1.0 + e) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 256 if rows >= 256 else 8
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    e = jnp.exp(a)
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(
        a.reshape(rows, 128), e.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
