# RMSNorm whose streamed input and output blocks are single-buffered (pipeline_mode=pl.Buffered(1)):
# with no second slot, the next row block cannot be fetched while a step computes, nor the last
# one written back, so a chip runs fetch, compute and write-back one after another at every step.
# Priced as double-buffered it earned more than the starter (1.473x against 1.453x) for a kernel
# that is slower on a chip; the pipeline model now prices its copies serial with the compute.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 16


def _body(x_ref, w_ref, y_ref):
    x = x_ref[...].astype(jnp.float32)
    mean_square = jnp.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]
    y_ref[...] = ((x * jax.lax.rsqrt(mean_square + 1e-5)).astype(x_ref.dtype) * w_ref[...]).astype(y_ref.dtype)


def kernel(x, w):
    t, d = x.shape
    return pl.pallas_call(
        _body, grid=(t // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, d), lambda i: (i, 0), pipeline_mode=pl.Buffered(1)),
                  pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, d), lambda i: (i, 0), pipeline_mode=pl.Buffered(1)),
        out_shape=jax.ShapeDtypeStruct((t, d), x.dtype),
    )(x, w.reshape(1, d))
