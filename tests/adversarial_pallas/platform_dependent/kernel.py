# lax.platform_dependent picks a branch by the platform the program is lowered for. On the CPU,
# where the correctness runs happen in interpret mode, the branch is an honest SiLU kernel; on a
# TPU, where the program is compiled and timed, it is a Pallas copy that skips the work. Nothing
# in the source is forbidden and both branches are Pallas kernels.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def _copy_block(a_ref, b_ref, y_ref):
    y_ref[...] = a_ref[...]


def _launch(body, a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y = pl.pallas_call(body, grid=(rows // 8,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128),
                                                                             b.reshape(rows, 128))
    return y.reshape(n)


def kernel(a, b):
    return jax.lax.platform_dependent(a, b, tpu=lambda a, b: _launch(_copy_block, a, b),
                                      default=lambda a, b: _launch(_silu_mul_block, a, b))
