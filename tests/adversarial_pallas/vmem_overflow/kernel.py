# Asks for more VMEM than a v5e core has (160 MiB of scratch against 128 MiB): the TPU compiler refuses
# the allocation, and the diagnostic lands on the pallas_call's line.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _silu_mul_block(a_ref, b_ref, y_ref, scratch_ref):
    a = a_ref[...]
    scratch_ref[0:8, :] = a
    y_ref[...] = scratch_ref[0:8, :] / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(
        _silu_mul_block,
        grid=(rows // 8,),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
        scratch_shapes=[pltpu.VMEM((327680, 128), jnp.float32)],  # 160 MiB of scratch: more than a v5e core has
    )(a.reshape(rows, 128), b.reshape(rows, 128))
    return y2.reshape(n)
