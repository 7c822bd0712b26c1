# A correct kernel that walks its block in a loop from -1,000,000,004 to -1,000,000,000, a quarter
# of the rows a pass. The schedule prints the exit test's constant as an unsigned 32-bit number
# (3,294,967,296): an estimate that reads the trip count from that constant alone counts billions
# of passes. Four trips must be read from the loop's start, bound and step.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PARTS = 4
START = -1_000_000_000 - PARTS


def _block(a_ref, b_ref, y_ref):
    rows = a_ref.shape[0] // PARTS

    def step(i, carry):
        part = (pl.ds(pl.multiple_of((i - START) * rows, rows), rows), slice(None))
        a = a_ref[part]
        y_ref[part] = a / (1.0 + jnp.exp(-a)) * b_ref[part]
        return carry

    jax.lax.fori_loop(START, START + PARTS, step, 0)


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 64  # one block size at every size set: the full-size program is then the checked one
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
