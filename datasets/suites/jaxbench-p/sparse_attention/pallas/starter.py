import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive causal sliding-window GQA (window W = 128: query i sees keys i - W < j <= i).
# Grid (query head, query block, key block of the window); the last axis walks the NKB key
# blocks that can overlap the window of the query block (the diagonal block and the ones before
# it), with an online softmax (running max, running sum, accumulator in VMEM scratch). Query head
# h reads kv head h // G through the k/v index maps. 128-row blocks of the whole head dim.
W = 128
BLOCK = 128
MASKED = -jnp.inf
M_INIT = -1e30  # finite start for the running max, so a fully masked block gives exp(0) = 1, not NaN


def _attention_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, nkb):
    i, j = pl.program_id(1), pl.program_id(2)
    b = q_ref.shape[0]
    kb = i - (nkb - 1) + j  # key block of this step (negative: before the sequence, skipped)

    @pl.when(j == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, M_INIT)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(kb >= 0)
    def _():
        q = q_ref[...]
        scale = 1.0 / (float(q.shape[-1]) ** 0.5)
        s = jax.lax.dot_general(q, k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        qpos = i * b + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        kpos = kb * b + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        dist = qpos - kpos
        s = jnp.where((dist >= 0) & (dist < W), s, MASKED)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(j == nkb - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)   # every row sees its own key: l > 0


def kernel(q, k, v):
    hq, s, d = q.shape
    g = hq // k.shape[0]
    b = min(s, BLOCK)
    assert s % b == 0, s
    nkb = -(-(W - 1) // b) + 1  # key blocks that can meet one query block's windows

    def q_map(h, i, j):
        return (h, i, 0)

    def kv_map(h, i, j):
        # lax.div, not //: jnp's floor division lowers through `sign`, which the deviceless
        # Mosaic compile rejects; h >= 0, so truncation is the floor
        return (jax.lax.div(h, g), jnp.maximum(i - (nkb - 1) + j, 0), 0)

    body = lambda *refs: _attention_block(*refs, nkb=nkb)
    return pl.pallas_call(
        body,
        grid=(hq, s // b, nkb),
        in_specs=[pl.BlockSpec((None, b, d), q_map),
                  pl.BlockSpec((None, b, d), kv_map),
                  pl.BlockSpec((None, b, d), kv_map)],
        out_specs=pl.BlockSpec((None, b, d), q_map),
        out_shape=jax.ShapeDtypeStruct((hq, s, d), q.dtype),
        scratch_shapes=[pltpu.VMEM((b, 1), jnp.float32), pltpu.VMEM((b, 1), jnp.float32),
                        pltpu.VMEM((b, d), jnp.float32)],
    )(q, k, v)
