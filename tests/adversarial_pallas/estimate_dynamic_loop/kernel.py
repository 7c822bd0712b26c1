# A correct kernel whose work sits in a loop with a trip count read from the data (1 at run time
# for these inputs; the compiler cannot know). The static profile counts a loop body once: a
# kernel that runs its body many times would be paid as if it ran it once.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(a_ref, b_ref, y_ref):
    trips = 1 + (a_ref[0, 0] > 1e30).astype(jnp.int32)

    def step(i, acc):
        a = a_ref[...]
        return a / (1.0 + jnp.exp(-a)) * b_ref[...]

    y_ref[...] = jax.lax.fori_loop(0, trips, step, jnp.zeros_like(y_ref))


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((256, 128) if rows >= 256 else (8, 128), lambda i: (i, 0))
    tile = 256 if rows >= 256 else 8
    y = pl.pallas_call(_block, grid=(rows // tile,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
