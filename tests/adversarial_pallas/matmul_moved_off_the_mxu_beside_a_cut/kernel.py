# Red team round 16: the same cut, with both products computed on the VPU (multiply and sum), so
# the candidate has no matmul FLOPs at any size and the work share had nothing to compare.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu



def _decode_block(lengths_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, block_s):
    # grid (b, kv head, cache block): the G query heads of one kv head against block_s cache
    # slots, with an online softmax carried across the cache blocks in m (running max), l
    # (running sum) and acc (running weighted sum of v). Naive: every block of the cache is read
    # and computed, also those wholly past lengths[b] (they are masked to zero weight).
    b, s = pl.program_id(0), pl.program_id(2)

    @pl.when(s == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    q = q_ref[0, 0]  # (G, D)
    k = k_ref[0, 0]  # (block_s, D)
    v = v_ref[0, 0]
    # no MXU: products and sums on the VPU (G is a handful of rows)
    qf, kf, vf = q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32)
    sc = jnp.sum(qf[:, None, :] * kf[None, :, :], axis=2) * scale
    slot = s * block_s + jax.lax.broadcasted_iota(jnp.int32, sc.shape, 1)
    sc = jnp.where(slot >= lengths_ref[b], -jnp.inf, sc)
    # Block 0 always holds slot 0 (lengths >= 1), so m is finite from the first block on and a
    # fully masked later block gives p = 0, alpha = 1 (no inf - inf).
    m_prev = m_ref[...]
    m_new = jnp.maximum(m_prev, jnp.max(sc, axis=1, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(sc - m_new)
    l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
    acc_ref[...] = alpha * acc_ref[...] + jnp.sum(p.astype(v.dtype).astype(jnp.float32)[:, :, None] * vf[None, :, :], axis=1)
    m_ref[...] = m_new

    @pl.when(s == pl.num_programs(2) - 1)
    def _():
        o_ref[0, 0] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


BC, SC = 3, 640  # batch rows and cache slots kept: layout only (pad with zeros, keep a constant part)


def kernel(q, k_cache, v_cache, lengths):
    B0, Hq, D = q.shape
    Hk, S0 = k_cache.shape[1], k_cache.shape[2]
    q = jnp.pad(q, ((0, 2 * B0), (0, 0), (0, 0)))[:BC]
    lengths = jnp.pad(lengths, ((0, 2 * B0),), constant_values=1)[:BC]
    k_cache, v_cache = (jnp.pad(c, ((0, 2 * B0), (0, 0), (0, 2 * S0), (0, 0)))[:BC, :, :SC] for c in (k_cache, v_cache))
    B, S = BC, SC
    G = Hq // Hk
    # 128 cache slots per step (64 KiB of K and of V at D = 128): the whole cache of a head
    # (4 MiB at Smax = 8192) would not fit VMEM double-buffered.
    block_s = 128 if S % 128 == 0 else S
    qg = q.reshape(B, Hk, G, D)  # the G query heads of kv head g are rows g*G .. g*G+G-1
    body = functools.partial(_decode_block, scale=1.0 / (float(D) ** 0.5), block_s=block_s)
    q_spec = pl.BlockSpec((1, 1, G, D), lambda b, g, s, lens: (b, g, 0, 0))
    kv_spec = pl.BlockSpec((1, 1, block_s, D), lambda b, g, s, lens: (b, g, s, 0))
    out = pl.pallas_call(
        body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,  # lengths, in SMEM
            grid=(B, Hk, S // block_s),
            in_specs=[q_spec, kv_spec, kv_spec],
            out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((G, 1), jnp.float32), pltpu.VMEM((G, 1), jnp.float32),
                            pltpu.VMEM((G, D), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((B, Hk, G, D), q.dtype),
    )(lengths.astype(jnp.int32), qg, k_cache, v_cache)
    return jax.lax.dynamic_update_slice(jnp.zeros((2 * B0, Hq, D), out.dtype), out.reshape(B, Hq, D), (0, 0, 0))[:B0]
