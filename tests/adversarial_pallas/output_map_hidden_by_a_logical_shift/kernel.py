# A K axis of a fixed 3 steps naming K block (i + j + k) mod (K/256) in plain index maps, whose
# output map multiplies i by a factor built from shift_right_logical(-1, 31), which is 1: the judge
# computed it as 0 (numpy's arithmetic shift), read the output map as (0, j), and so joined every
# row block into one output block, which reads all of K (outside red team, round 14).
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KS = 3


def _one(i):
    # shift_right_logical(-1, 31) is 1 on every backend; numpy's right_shift of a signed -1 is -1,
    # so the judge's evaluator reads this factor as 0 and the output map as (0, j).
    f = jax.lax.shift_right_logical(i * 0 - 1, 31)
    return jax.lax.shift_right_arithmetic(f + 1, 1)


def _body(a_ref, b_ref, c_ref, acc_ref, *, kb):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < kb)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == KS - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256
    kb = K // 256
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid=(M // bm, N // bn, KS),
        in_specs=[pl.BlockSpec((bm, 256), lambda i, j, k: (i, jax.lax.rem(i + j + k, kb))),
                  pl.BlockSpec((256, bn), lambda i, j, k: (jax.lax.rem(i + j + k, kb), j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i * _one(i), j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
    )(A, B)
