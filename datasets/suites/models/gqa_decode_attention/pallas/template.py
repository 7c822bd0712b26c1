# The starter's GQA decode attention with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob). A cache block is either the starter's
# constant 128 slots (128 divides Smax in every size set) or a fixed fraction of Smax (Smax / 4:
# 64 and 160 slots at the checked sizes, 2048 at the full size; or the whole of Smax), so each
# setting follows the task's sizes in one way at every size set and its full-size program is proven
# the checked one (docs/pallas.md "What is paid is what was checked").
#   BLOCK_S  cache slots per grid step: "b128" 128 (the starter's: 64 KiB of K at D = 128, 8,192
#            grid steps at the full size); "s4" Smax / 4; "whole" the whole cache of a head (one
#            step per head and sequence)
#   HEADS    kv heads per grid step: "one" (the starter's: grid (B, Hk, cache blocks), a 2-D
#            (G, D) x (D, slots) product); "all" every kv head of a sequence in one step (grid
#            (B, cache blocks), a product batched over the Hk heads): Hk times fewer, larger steps
#            and DMAs
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _decode_block(lengths_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, block_s, batched):
    # grid (b, [kv head,] cache block): the G query heads of a kv head (of every kv head when
    # batched: a leading head axis) against block_s cache slots, with an online softmax carried
    # across the cache blocks in m (running max), l (running sum) and acc (running weighted sum of
    # v). Every block of the cache is read and computed, also those wholly past lengths[b] (they
    # are masked to zero weight).
    b = pl.program_id(0)
    s = pl.program_id(1 if batched else 2)
    steps = pl.num_programs(1 if batched else 2)

    @pl.when(s == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    if batched:
        q, k, v = q_ref[0], k_ref[0], v_ref[0]  # (Hk, G, D), (Hk, block_s, D)
        qk = (((2,), (2,)), ((0,), (0,)))
        pv = (((2,), (1,)), ((0,), (0,)))
    else:
        q, k, v = q_ref[0, 0], k_ref[0, 0], v_ref[0, 0]  # (G, D), (block_s, D)
        qk = (((1,), (1,)), ((), ()))
        pv = (((1,), (0,)), ((), ()))
    sc = jax.lax.dot_general(q, k, qk, preferred_element_type=jnp.float32) * scale
    slot = s * block_s + jax.lax.broadcasted_iota(jnp.int32, sc.shape, sc.ndim - 1)
    sc = jnp.where(slot >= lengths_ref[b], -jnp.inf, sc)
    # Block 0 always holds slot 0 (lengths >= 1), so m is finite from the first block on and a
    # fully masked later block gives p = 0, alpha = 1 (no inf - inf).
    m_prev = m_ref[...]
    m_new = jnp.maximum(m_prev, jnp.max(sc, axis=-1, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(sc - m_new)
    l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
    acc_ref[...] = alpha * acc_ref[...] + jax.lax.dot_general(p.astype(v.dtype), v, pv,
                                                              preferred_element_type=jnp.float32)
    m_ref[...] = m_new

    @pl.when(s == steps - 1)
    def _():
        if batched:
            o_ref[0] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)
        else:
            o_ref[0, 0] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def kernel(q, k_cache, v_cache, lengths):
    B, Hq, D = q.shape
    Hk, S = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hk
    block_s = {"b128": 128, "s4": S // 4, "whole": S}[BLOCK_S]
    batched = HEADS == "all"
    qg = q.reshape(B, Hk, G, D)  # the G query heads of kv head g are rows g*G .. g*G+G-1
    body = functools.partial(_decode_block, scale=1.0 / (float(D) ** 0.5), block_s=block_s, batched=batched)
    if batched:
        grid = (B, S // block_s)
        q_spec = pl.BlockSpec((1, Hk, G, D), lambda b, s, lens: (b, 0, 0, 0))
        kv_spec = pl.BlockSpec((1, Hk, block_s, D), lambda b, s, lens: (b, 0, s, 0))
        carry = (Hk, G)
    else:
        grid = (B, Hk, S // block_s)
        q_spec = pl.BlockSpec((1, 1, G, D), lambda b, g, s, lens: (b, g, 0, 0))
        kv_spec = pl.BlockSpec((1, 1, block_s, D), lambda b, g, s, lens: (b, g, s, 0))
        carry = (G,)
    params = {}
    if BLOCK_S == "whole" or batched:
        # The largest setting (every kv head's whole cache, 16 MiB of K and of V at the full size)
        # asks about 64 MiB of VMEM double-buffered: above the default scoped limit, inside the
        # chip's 128 MiB.
        params["compiler_params"] = pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024)
    out = pl.pallas_call(
        body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,  # lengths, in SMEM
            grid=grid,
            in_specs=[q_spec, kv_spec, kv_spec],
            out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM(carry + (1,), jnp.float32), pltpu.VMEM(carry + (1,), jnp.float32),
                            pltpu.VMEM(carry + (D,), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((B, Hk, G, D), q.dtype),
        **params,
    )(lengths.astype(jnp.int32), qg, k_cache, v_cache)
    return out.reshape(B, Hq, D)
