# A correct kernel whose loop bound is a scalar prefetched into SMEM, computed from the data (1 at
# run time for these inputs). The loop's trip count is known only at run time: the static
# schedule holds its body once, whatever the bound.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _block(trips_ref, a_ref, b_ref, y_ref):
    def step(i, acc):
        a = a_ref[...]
        return a / (1.0 + jnp.exp(-a)) * b_ref[...]

    y_ref[...] = jax.lax.fori_loop(0, trips_ref[0], step, jnp.zeros_like(y_ref))


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    tile = 256 if rows >= 256 else 8
    trips = 1 + (a[:1] > 1e30).astype(jnp.int32)
    block = pl.BlockSpec((tile, 128), lambda i, trips_ref: (i, 0))
    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(rows // tile,), in_specs=[block, block],
                                        out_specs=block)
    y = pl.pallas_call(_block, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(
        trips, a.reshape(rows, 128), b.reshape(rows, 128))
    return y.reshape(n)
