# Red team 24: matmul + gelu + softmax, whose starter the full-size sample cannot run (its softmax
# kernel reads whole rows): whole-K panels 'read' by a load used only through a static slice, and
# 5 K chunks summed (all of K where checked, 5 of 32 at the full size).

import functools
import math
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
MODE = "win"
BK = 256
TN = 256
WIN = 5
PRE = 3


def _dot(a, b):
    return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision=jax.lax.Precision.HIGHEST,
                               preferred_element_type=jnp.float32)


def _linear(x_ref, w_ref, b_ref, z_ref, acc_ref, *, chunks, nk):
    if MODE == "win":
        K = x_ref.shape[1]
        bigx = x_ref[0:8, pl.ds(0, K)]
        bigw = w_ref[0:8, pl.ds(0, K)]
        acc_ref[...] = jnp.zeros_like(acc_ref) + (bigx[0:1, 0:1] + bigw[0:1, 0:1]) * 0.0
        for c in range(PRE):
            acc_ref[...] += _dot(x_ref[:, c * BK:(c + 1) * BK], w_ref[:, c * BK:(c + 1) * BK])
        lo = PRE
    else:
        acc_ref[...] = jnp.zeros_like(acc_ref)
        lo = 0

    def step(c, carry):
        @pl.when(c < nk)
        def _():
            start = pl.multiple_of(c * BK, BK)
            acc_ref[...] += _dot(x_ref[:, pl.ds(start, BK)], w_ref[:, pl.ds(start, BK)])
        return carry

    jax.lax.fori_loop(lo, chunks, step, 0)
    v = acc_ref[...] + b_ref[...]
    z_ref[...] = (0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))).astype(z_ref.dtype)


def _softmax_rows_block(z_ref, y_ref):
    z = z_ref[...]
    e = jnp.exp(z - jnp.max(z, axis=1, keepdims=True))
    y_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(y_ref.dtype)


def kernel(x, weight, bias):
    M, K = x.shape
    N = weight.shape[0]
    TM = M // 2
    nk = K // BK
    chunks = WIN if MODE == "win" else nk
    z = pl.pallas_call(
        functools.partial(_linear, chunks=chunks, nk=nk),
        grid=(M // TM, N // TN),
        in_specs=[pl.BlockSpec((TM, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((TN, K), lambda i, j: (j, 0)),
                  pl.BlockSpec((1, TN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((TM, TN), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), x.dtype),
        scratch_shapes=[pltpu.VMEM((TM, TN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024),
    )(x, weight, bias.reshape(1, N))
    rows = 8
    return pl.pallas_call(
        _softmax_rows_block,
        grid=(M // rows,),
        in_specs=[pl.BlockSpec((rows, N), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, N), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((M, N), x.dtype),
    )(z)

