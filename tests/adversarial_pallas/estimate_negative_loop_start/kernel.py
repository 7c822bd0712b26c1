# A correct kernel that walks its block in a loop from -4 to 0, a quarter of the rows a pass.
# The loop's exit test compares with 0: an estimate that reads the trip count from the exit
# test's constant alone counts one pass, and pays a quarter of the work.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PARTS = 4


def _block(a_ref, b_ref, y_ref):
    rows = a_ref.shape[0] // PARTS

    def step(i, carry):
        part = (pl.ds(pl.multiple_of((i + PARTS) * rows, rows), rows), slice(None))
        a = a_ref[part]
        y_ref[part] = a / (1.0 + jnp.exp(-a)) * b_ref[part]
        return carry

    jax.lax.fori_loop(-PARTS, 0, step, 0)


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 64  # one block size at every size set: the full-size program is then the checked one
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
