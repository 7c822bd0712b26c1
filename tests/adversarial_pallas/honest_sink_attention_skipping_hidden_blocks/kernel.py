KEY_BLOCKS = "visible"
BLOCK_PARALLEL = "arbitrary"
# The starter's sink + sliding-window attention with its decisions as knobs (pallas.json "knobs";
# an episode's `knobs` action prepends one `NAME = value` line per knob). Blocks are 128 x 128
# score tiles (128 divides every size set's S, and is the window's width).
#   KEY_BLOCKS  "all": every key block of the sequence is fetched and computed, also those the mask
#               hides entirely (the starter's); "visible": only the three a query block can see
#               (block 0, which holds the sinks, and the window's blocks qi - 1 and qi), a grid of
#               3 key steps instead of S / 128, with a step that repeats block 0 masked out whole
#   BLOCK_PARALLEL  the grid's head and query axes as "arbitrary" (the starter's default) or
#               "parallel" (a megacore may split them between its cores)
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SINK, WINDOW = 4, 128  # constants of the task
BLOCK = 128


def _attn_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, key_block, valid):
    # grid (head, query block, key step): scores of BLOCK queries against the key step's BLOCK keys
    # (key_block(qi, kj) names which), the sink/window/causal mask, and an online softmax carried
    # across the key steps in m (running max), l (running sum) and acc (running weighted sum of v).
    qi, kj = pl.program_id(1), pl.program_id(2)

    @pl.when(kj == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    s = jax.lax.dot_general(q_ref[0], k_ref[0], (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32) * scale
    i = qi * BLOCK + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
    j = key_block(qi, kj) * BLOCK + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    visible = (j <= i) & ((j < SINK) | (i - j < WINDOW)) & valid(qi, kj)
    s = jnp.where(visible, s, -jnp.inf)
    # The first key step is block 0, whose key 0 every query sees, so m is finite after it and a
    # fully hidden later step gives p = 0, alpha = 1 (no inf - inf).
    m_prev = m_ref[...]
    m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(s - m_new)
    l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
    acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p.astype(v_ref.dtype), v_ref[0], preferred_element_type=jnp.float32)
    m_ref[...] = m_new

    @pl.when(kj == pl.num_programs(2) - 1)
    def _():
        o_ref[0] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def _every_block(qi, kj):
    return kj


def _always(qi, kj):
    return True


def _window_block(qi, kj):
    # key step 0: block 0 (the sinks); 1: block qi - 1; 2: block qi (the window, WINDOW = BLOCK)
    return jnp.where(kj == 0, 0, jnp.where(kj == 1, jnp.maximum(qi - 1, 0), qi))


def _window_valid(qi, kj):
    # a step whose block is block 0 again (qi < 2 for step 1, qi < 1 for step 2) adds nothing
    return (kj == 0) | ((kj == 1) & (qi >= 2)) | ((kj == 2) & (qi >= 1))


def kernel(q, k, v):
    H, S, D = q.shape
    if KEY_BLOCKS == "visible":
        key_block, valid, key_steps = _window_block, _window_valid, 3
    else:
        key_block, valid, key_steps = _every_block, _always, S // BLOCK
    body = functools.partial(_attn_block, scale=1.0 / (float(D) ** 0.5), key_block=key_block, valid=valid)
    q_spec = pl.BlockSpec((1, BLOCK, D), lambda h, i, j: (h, i, 0))
    kv_spec = pl.BlockSpec((1, BLOCK, D), lambda h, i, j: (h, key_block(i, j), 0))
    semantics = "parallel" if BLOCK_PARALLEL == "parallel" else "arbitrary"
    return pl.pallas_call(
        body,
        grid=(H, S // BLOCK, key_steps),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct((H, S, D), q.dtype),
        scratch_shapes=[pltpu.VMEM((BLOCK, 1), jnp.float32), pltpu.VMEM((BLOCK, 1), jnp.float32),
                        pltpu.VMEM((BLOCK, D), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics, semantics, "arbitrary")),
    )(q, k, v)
