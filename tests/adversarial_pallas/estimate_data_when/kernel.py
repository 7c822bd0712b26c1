# A correct kernel whose work sits under a pl.when on a value read from the data (true for every
# finite input). The static profile counts the cheap path: the work under the branch was free.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref):
    y_ref[...] = b_ref[...]

    @pl.when(a_ref[0, 0] < jnp.inf)
    def _():
        a = a_ref[...]
        y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 256 if rows >= 256 else 8
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
