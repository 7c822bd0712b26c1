# A correct kernel that walks its block in a loop with a static trip count, a quarter of the rows
# a pass. A static schedule holds a loop body once; if the loop stays a loop, the bundles are a
# quarter of the work: the estimate must count the trips (the jaxpr says how many), or the kernel
# would be paid for a quarter of what it does.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref):
    rows = a_ref.shape[0] // 4

    def step(i, carry):
        part = (pl.ds(pl.multiple_of(i * rows, 8), rows), slice(None))
        a = a_ref[part]
        y_ref[part] = a / (1.0 + jnp.exp(-a)) * b_ref[part]
        return carry

    jax.lax.fori_loop(0, 4, step, 0)


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 256 if rows >= 256 else 32
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
