# A correct kernel whose whole work sits under a pl.when on the grid index that is true on every
# step. No data is read for the condition, yet the static profile counts the path without the
# work: the estimate would be that of a kernel that does nothing.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref):
    @pl.when(pl.program_id(0) >= 0)
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
