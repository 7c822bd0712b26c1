# Red team 23: retention with the starter's scalar-prefetched log-decay table, faked whole-S reads
# and a 3-chunk key window (the decay does not cancel the keys it drops: gamma up to 1 - 2^-20).

import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
MODE = "win3"
BQ = 128
WIN = 3


def _body(lg_ref, q_ref, k_ref, v_ref, o_ref, acc_ref, abs_ref, *, chunks):
    h, qi = pl.program_id(1), pl.program_id(2)
    bigk = k_ref[...]
    bigv = v_ref[...]
    acc_ref[...] = jnp.zeros_like(acc_ref) + (bigk[0:1, 0:1].astype(jnp.float32) + bigv[0:1, 0:1].astype(jnp.float32)) * 0.0
    abs_ref[...] = jnp.zeros_like(abs_ref)
    q = q_ref[...]
    scale = 1.0 / (float(q.shape[-1]) ** 0.5)
    lg = lg_ref[h]

    def step(c, carry):
        if MODE == "win3":
            kb = qi - (WIN - 1) + c
        else:
            kb = c
        valid = (kb >= 0) & (kb <= qi)
        kbc = jnp.maximum(kb, 0)

        @pl.when(valid)
        def _():
            start = pl.multiple_of(kbc * BQ, BQ)
            k = k_ref[pl.ds(start, BQ), :]
            v = v_ref[pl.ds(start, BQ), :]
            s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
            n = (qi * BQ + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)).astype(jnp.float32)
            m = (kbc * BQ + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)).astype(jnp.float32)
            dist = n - m
            decay = jnp.where(dist >= 0.0, jnp.exp(lg * jnp.maximum(dist, 0.0)), 0.0)
            s = s * decay
            abs_ref[...] += jnp.sum(jnp.abs(s), axis=-1, keepdims=True)
            acc_ref[...] += jnp.dot(s.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return carry

    jax.lax.fori_loop(0, chunks, step, 0)
    o_ref[...] = (acc_ref[...] / jnp.maximum(abs_ref[...], 1.0)).astype(o_ref.dtype)


def kernel(q, k, v):
    b, h, s, dk = q.shape
    dv = v.shape[-1]
    chunks = WIN if MODE == "win3" else s // BQ
    log_gamma = jnp.log(1.0 - jnp.power(jnp.float32(2.0), -5.0 - jnp.arange(h, dtype=jnp.float32)))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(b, h, s // BQ),
        in_specs=[pl.BlockSpec((None, None, BQ, dk), lambda bi, hi, qi, lg: (bi, hi, qi, 0)),
                  pl.BlockSpec((None, None, s, dk), lambda bi, hi, qi, lg: (bi, hi, 0, 0)),
                  pl.BlockSpec((None, None, s, dv), lambda bi, hi, qi, lg: (bi, hi, 0, 0))],
        out_specs=pl.BlockSpec((None, None, BQ, dv), lambda bi, hi, qi, lg: (bi, hi, qi, 0)),
        scratch_shapes=[pltpu.VMEM((BQ, dv), jnp.float32), pltpu.VMEM((BQ, 1), jnp.float32)],
    )
    return pl.pallas_call(
        functools.partial(_body, chunks=chunks),
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((b, h, s, dv), q.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024),
    )(log_gamma, q, k, v)
