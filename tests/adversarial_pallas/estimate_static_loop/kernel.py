# A correct kernel that does its work four times in a loop with a static trip count (each pass
# overwrites the last). A static schedule holds a loop body once: the estimate must count the
# trips (the jaxpr says how many), or four passes would be paid as one.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref):
    def step(i, acc):
        a = a_ref[...]
        return a / (1.0 + jnp.exp(-a)) * b_ref[...]

    y_ref[...] = jax.lax.fori_loop(0, 4, step, jnp.zeros_like(y_ref))


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 256 if rows >= 256 else 8
    block = pl.BlockSpec((tile, 128), lambda i: (i, 0))
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
