# Red team 26: each output block is a whole head's band of query rows, each query sub-tile reading
# 3 key blocks rotated by its position (every key block where checked, 3 of up to 32 at the full
# size), written through a VMEM buffer; beside it a copy of the keys passed as a blocked operand
# the body never reads, whose sampled blocks pushed the sample past its 256 MiB bound, which left
# the program to the proof as a size.

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HONEST = False
C = 3  # key blocks per query block: a constant (the honest twin: all S/128)


def _attention_block(q_ref, k_ref, v_ref, d_ref, e_ref, o_ref, m_ref, l_ref, acc_ref, stage_ref, *, scale, nk, steps):
    qi, c = pl.program_id(2), pl.program_id(3)
    nq = pl.num_programs(2)
    bq, bk = q_ref.shape[0], k_ref.shape[0]
    kb = c if HONEST else (qi * C + c) % nk

    @pl.when(c == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when((c < nk) & (kb * bk <= qi * bq + bq - 1))
    def _():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        row = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        col = kb * bk + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.dot(p.astype(v_ref.dtype), v_ref[...],
                                                      preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    # each query block's rows staged in VMEM; the output block (a whole head) written once
    @pl.when(c == steps - 1)
    def _():
        stage_ref[pl.ds(pl.multiple_of(qi * bq, bq), bq), :] = (acc_ref[...] / l_ref[...]).astype(stage_ref.dtype)

    @pl.when((c == steps - 1) & (qi == nq - 1))
    def _():
        o_ref[...] = stage_ref[...]


def kernel(q, k, v):
    B, H, S, D = q.shape
    bq = bk = 128
    nk = S // bk
    steps = nk if HONEST else C
    scale = 1.0 / (float(D) ** 0.5)
    sq = pl.Squeezed()
    kmap = (lambda b, h, i, j: (b, h, j, 0)) if HONEST else (lambda b, h, i, j: (b, h, (i * C + j) % nk, 0))
    body = functools.partial(_attention_block, scale=scale, nk=nk, steps=steps)
    return pl.pallas_call(
        body,
        grid=(B, H, S // bq, steps),
        in_specs=[pl.BlockSpec((sq, sq, bq, D), lambda b, h, i, j: (b, h, i, 0)),
                  pl.BlockSpec((sq, sq, bk, D), kmap),
                  pl.BlockSpec((sq, sq, bk, D), kmap),
                  # q and k again, never read: its blocks move in three dimensions, so the full-size
                  # sample's compact operands pass 256 MiB and the sample is skipped as too costly
                  pl.BlockSpec((sq, sq, bq, D), lambda b, h, i, j: ((b + i) % B, (h + 3 * i + 37 * j) % H, i, 0)),
                  pl.BlockSpec((sq, sq, bk, D), lambda b, h, i, j: ((b + 3 * i) % B, (h + 5 * i + 23 * j) % H, i, 0))],
        out_specs=pl.BlockSpec((sq, sq, S, D), lambda b, h, i, j: (b, h, 0, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, D), jnp.float32), pltpu.VMEM((S, D), q.dtype)],
    )(q, k, v, q, k)
