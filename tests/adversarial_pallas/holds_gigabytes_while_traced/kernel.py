# Holds gigabytes while it is traced: numpy arrays built at trace time (np.ones writes every page,
# so each one is resident, not merely reserved), 16 GiB in all, kept alive in a module list. The
# tracer's 32 GiB of address space allows it; on a host without swap it would end in the kernel's
# OOM killer (which may pick any process of the host) instead of a verdict. The kernel itself is
# silu_mul's honest starter: without a resident-memory limit this earned `ok`.
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

_HELD = []


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    for _ in range(64):
        _HELD.append(np.ones(32 << 20))  # 32 Mi float64: 256 MiB, written
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(_silu_mul_block, grid=(rows // 8,), in_specs=[block, block], out_specs=block,
                        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype))(a.reshape(rows, 128), b.reshape(rows, 128))
    return y2.reshape(n)
