# The starter's causal sliding-window GQA with its decisions as knobs (pallas.json "knobs"; an
# episode's `knobs` action prepends one `NAME = value` line per knob). Blocks stay 128 rows (the
# window's width, and the only constant dividing every size set's S); what changes is how much
# work a grid step carries:
#   HEADS      query heads per grid step: "one" (the starter's; grid over HQ, each step fetching
#              its kv head's blocks again) or "group" (the G = HQ / HKV query heads that share a
#              kv head: one step scores G x 128 query rows against the kv blocks fetched once, as
#              (G * 128, D) products; a grid over HKV, G times fewer steps)
#   KEY_STEPS  "grid": the key blocks a query block can see (its own and the one before) are the
#              grid's last axis, with an online softmax carried across them in VMEM scratch (the
#              starter's); "fused": both key blocks are inputs of one step (the previous one
#              clamped to block 0 and masked out whole for the first query block), one plain
#              softmax over their 256 scores, half the grid steps and no rescaling
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

W = 128
BLOCK = 128
MASKED = -jnp.inf
M_INIT = -1e30  # finite start for the running max, so a fully masked block gives exp(0) = 1, not NaN


def _rows(q_ref):
    # the step's query rows as one (rows, D) matrix: (128, D), or (G * 128, D) for a head group
    q = q_ref[...]
    return q if q.ndim == 2 else q.reshape(q.shape[0] * q.shape[1], q.shape[2])


def _query_positions(i, b, shape):
    # sequence position of each score row: row r of a head group is row r % b of its head's block
    # (the remainder taken at every size set, G = 1 included, so the program is one at all of them)
    base = i * b
    row = jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    return base + (jax.lax.rem(row, b) if HEADS == "group" else row)


def _store(o_ref, out):
    o_ref[...] = (out if o_ref.ndim == 2 else out.reshape(o_ref.shape)).astype(o_ref.dtype)


def _scores(q, k_ref, i, kb, b):
    scale = 1.0 / (float(q.shape[-1]) ** 0.5)
    s = jax.lax.dot_general(q, k_ref[...], (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32) * scale
    qpos = _query_positions(i, b, s.shape)
    kpos = kb * b + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    dist = qpos - kpos
    return jnp.where((dist >= 0) & (dist < W), s, MASKED)


def _online_block(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, nkb, b):
    # Grid (head or head group, query block, key block of the window), the starter's online softmax.
    i, j = pl.program_id(1), pl.program_id(2)
    kb = i - (nkb - 1) + j  # key block of this step (negative: before the sequence, skipped)

    @pl.when(j == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, M_INIT)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(kb >= 0)
    def _():
        s = _scores(_rows(q_ref), k_ref, i, kb, b)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(j == nkb - 1)
    def _():
        _store(o_ref, acc_ref[...] / l_ref[...])   # every row sees its own key: l > 0


def _fused_block(q_ref, kp_ref, vp_ref, k_ref, v_ref, o_ref, *, b):
    # Grid (head or head group, query block): the previous key block (kp, vp; block 0 again for the
    # first query block, whose scores against it are masked out whole) and the own one (k, v).
    i = pl.program_id(1)
    q = _rows(q_ref)
    s_prev = jnp.where(i > 0, _scores(q, kp_ref, i, i - 1, b), MASKED)
    s_own = _scores(q, k_ref, i, i, b)
    m = jnp.maximum(jnp.max(s_prev, axis=-1, keepdims=True), jnp.max(s_own, axis=-1, keepdims=True))
    p_prev, p_own = jnp.exp(s_prev - m), jnp.exp(s_own - m)   # m is finite: a row sees its own key
    l = jnp.sum(p_prev, axis=-1, keepdims=True) + jnp.sum(p_own, axis=-1, keepdims=True)
    acc = (jnp.dot(p_prev.astype(vp_ref.dtype), vp_ref[...], preferred_element_type=jnp.float32)
           + jnp.dot(p_own.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32))
    _store(o_ref, acc / l)


def kernel(q, k, v):
    hq, s, d = q.shape
    hkv = k.shape[0]
    g = hq // hkv
    b = min(s, BLOCK)
    assert s % b == 0, s
    nkb = -(-(W - 1) // b) + 1  # key blocks that can meet one query block's windows
    group = HEADS == "group"
    rows = g * b if group else b

    if group:
        # axis 0 walks the kv heads; the q/o block is the kv head's G query heads
        q_spec = pl.BlockSpec((g, b, d), lambda h, i, *j: (h, i, 0))
        kv_head = lambda h: h
    else:
        q_spec = pl.BlockSpec((None, b, d), lambda h, i, *j: (h, i, 0))
        # lax.div, not //: jnp's floor division lowers through `sign`, which the deviceless
        # Mosaic compile rejects; h >= 0, so truncation is the floor
        kv_head = lambda h: jax.lax.div(h, g)
    heads = hkv if group else hq

    if KEY_STEPS == "fused":
        assert nkb == 2, nkb  # the window reaches back into one block before the own one
        prev_spec = pl.BlockSpec((None, b, d), lambda h, i: (kv_head(h), jnp.maximum(i - 1, 0), 0))
        own_spec = pl.BlockSpec((None, b, d), lambda h, i: (kv_head(h), i, 0))
        return pl.pallas_call(
            lambda *refs: _fused_block(*refs, b=b),
            grid=(heads, s // b),
            in_specs=[q_spec, prev_spec, prev_spec, own_spec, own_spec],
            out_specs=q_spec,
            out_shape=jax.ShapeDtypeStruct((hq, s, d), q.dtype),
        )(q, k, v, k, v)

    def kv_map(h, i, j):
        return (kv_head(h), jnp.maximum(i - (nkb - 1) + j, 0), 0)

    body = lambda *refs: _online_block(*refs, nkb=nkb, b=b)
    return pl.pallas_call(
        body,
        grid=(heads, s // b, nkb),
        in_specs=[q_spec,
                  pl.BlockSpec((None, b, d), kv_map),
                  pl.BlockSpec((None, b, d), kv_map)],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct((hq, s, d), q.dtype),
        scratch_shapes=[pltpu.VMEM((rows, 1), jnp.float32), pltpu.VMEM((rows, 1), jnp.float32),
                        pltpu.VMEM((rows, d), jnp.float32)],
    )(q, k, v)
