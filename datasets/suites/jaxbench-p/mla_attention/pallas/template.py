# The starter's MLA attention with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob). A block is either the starter's
# constant (which divides every size set) or a fixed fraction of its dimension, so each setting
# follows the task's sizes in one way at every size set and its full-size program is proven the
# checked one (docs/pallas.md "What is paid is what was checked").
#   ATTN_BLOCK  query and key rows per step of the attention kernel: "r128" 128 (the starter's:
#               a 16 x 16 grid at the full S = 2048); "s8" S / 8 (256 rows at the full size, an
#               8 x 8 grid; 32 and 64 at the checked sizes)
#   PROJ_K      the step of the three DM-deep contractions (x . w_dq, x . w_dkv, x . w_kr): "t256"
#               256 deep (the starter's: 28 steps at the full DM = 7168); "half" DM / 2 (3584)
#   OUT_N       the output projection's (o . w_o, [S, 512] x [512, DM]) column tile: "t256" 256
#               (the starter's: 28 column tiles at the full DM = 7168); "half" DM / 2 (3584 at the
#               full size): 14x fewer grid steps, each a wider product
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# bfloat16 inputs and output (3p's dtypes). Every dot feeds the MXU bfloat16 blocks and sums in
# float32 (preferred_element_type), its result rounded to bfloat16 as the reference rounds it; the
# RMSNorm statistics, RoPE's arithmetic, the scores and the softmax are float32.
_F32 = jnp.float32

# Head dims fixed by the task's weight shapes: w_uq [QL, H*(DN+DR)], w_uk/w_uv [KVL, H*DN|H*DV].
DN, DR, DV = 64, 32, 64


def _tile(dim, preferred):
    # The preferred tile when it divides the dimension, else the whole dimension (always legal).
    return preferred if dim % preferred == 0 else dim


# ---- projections: tiled matmul, optionally with a fused RMSNorm epilogue -------------------

def _matmul_block(*refs, rms):
    # Grid (i, j, k): y[i, j] = sum_k a[i, k] . b[k, j] in a float32 scratch over k, rounded to
    # bfloat16 at the end. With `rms` the tile holds whole rows (bn = N) and the rounded y gets
    # RMSNorm: statistics in float32, the normalized row rounded, then scaled by w in bfloat16.
    if rms:
        a_ref, b_ref, w_ref, y_ref, acc_ref = refs
    else:
        a_ref, b_ref, y_ref, acc_ref = refs
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=_F32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        y = acc_ref[...].astype(y_ref.dtype)
        if rms:
            yf = y.astype(_F32)
            normed = (yf * jax.lax.rsqrt(jnp.mean(yf * yf, axis=1, keepdims=True) + 1e-6)).astype(y_ref.dtype)
            # the product of two bfloat16 values is exact in float32: rounded once, as in bfloat16
            y = normed.astype(_F32) * w_ref[...].astype(_F32)
        y_ref[...] = y.astype(y_ref.dtype)


def _matmul(a, b, norm_weight=None, whole_k=False, bn=None, bk=None):
    M, K = a.shape
    N = b.shape[1]
    rms = norm_weight is not None
    # 256-row / 256-deep tiles; RMSNorm needs a row's whole N in one tile (N <= 1536 here, its
    # 256 x 1536 float32 accumulator is 1.5 MiB). A contraction over a latent (QL, KVL <= 1536) is
    # whole: one rule at every size, whatever the latent's width.
    bm = _tile(M, 256)
    if bk is None:
        bk = K if whole_k else _tile(K, 256)
    if bn is None:
        bn = N if rms else _tile(N, 256)
    in_specs = [pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))]
    args = [a, b]
    if rms:
        in_specs.append(pl.BlockSpec((1, bn), lambda i, j, k: (0, j)))
        args.append(norm_weight.reshape(1, N))
    # A DM/2-deep step of x . w_dq holds a (3584, 1536) bfloat16 w block, double-buffered 21 MiB:
    # above the default scoped VMEM limit, inside the chip's 128 MiB.
    params = {} if PROJ_K == "t256" else dict(
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024))
    return pl.pallas_call(
        functools.partial(_matmul_block, rms=rms),
        grid=(M // bm, N // bn, K // bk),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), _F32)],
        **params,
    )(*args)


# ---- causal attention, all heads of a query block per grid step, RoPE in the kernel --------

def _rope(x, cos, sin):
    # half-split pairs (t, t + DR/2); cos/sin broadcast over the leading (head) dims; the rotation
    # in float32 on the bfloat16 values, rounded once for the MXU
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].astype(_F32), x[..., half:].astype(_F32)
    cos, sin = cos.astype(_F32), sin.astype(_F32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _attention_block(q_ref, qcos_ref, qsin_ref, kn_ref, kpe_ref, kcos_ref, ksin_ref, v_ref,
                     o_ref, m_ref, l_ref, acc_ref, *, scale):
    # Grid (qi, ki), ki innermost: the (H, bq, DN + DR) query block of every head against the
    # (H, bk, DN) keys, the shared (bk, DR) rope keys and the (H, bk, DV) values; online softmax
    # state per head in scratch (float32); the probabilities rounded to bfloat16 for P.V; the
    # output block is written on the last key block.
    qi, ki = pl.program_id(0), pl.program_id(1)
    H, bq = q_ref.shape[0], q_ref.shape[1]
    bk = kn_ref.shape[1]

    @pl.when(ki == 0)
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki * bk <= qi * bq + bq - 1)  # causal: later key blocks contribute nothing
    def _():
        q = q_ref[...]
        q_nope = q[:, :, :DN]                                              # (H, bq, DN)
        q_pe = _rope(q[:, :, DN:], qcos_ref[...], qsin_ref[...])           # (H, bq, DR)
        k_pe = _rope(kpe_ref[...], kcos_ref[...], ksin_ref[...])           # (bk, DR)
        s_nope = jnp.einsum("hqd,hkd->hqk", q_nope, kn_ref[...], preferred_element_type=_F32)
        s_pe = jax.lax.dot_general(q_pe.reshape(H * bq, DR), k_pe, (((1,), (1,)), ((), ())),
                                   preferred_element_type=_F32).reshape(H, bq, bk)
        s = (s_nope + s_pe) * scale
        row = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (H, bq, bk), 1)
        col = ki * bk + jax.lax.broadcasted_iota(jnp.int32, (H, bq, bk), 2)
        s = jnp.where(col > row, -jnp.inf, s)
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(s, axis=2, keepdims=True))
        alpha = jnp.exp(m_old - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = l_ref[...] * alpha + jnp.sum(p, axis=2, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha + jnp.einsum("hqk,hkd->hqd", p.astype(v_ref.dtype), v_ref[...],
                                                         preferred_element_type=_F32)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def _attention(q, k_nope, k_pe_raw, v, cos, sin):
    # q [H, S, DN+DR], k_nope [H, S, DN], v [H, S, DV], k_pe_raw [S, DR], cos/sin [S, DR/2]
    H, S, _ = q.shape
    # 128 queries x 128 keys x all H heads per step (the q block is H*128*96*2 = 192 KiB at H=8),
    # or S / 8 of each
    bq = bk = _tile(S, 128) if ATTN_BLOCK == "r128" else S // 8
    scale = 1.0 / (float(DN + DR) ** 0.5)
    half = DR // 2
    return pl.pallas_call(
        functools.partial(_attention_block, scale=scale),
        grid=(S // bq, S // bk),
        in_specs=[pl.BlockSpec((H, bq, DN + DR), lambda i, j: (0, i, 0)),
                  pl.BlockSpec((bq, half), lambda i, j: (i, 0)),
                  pl.BlockSpec((bq, half), lambda i, j: (i, 0)),
                  pl.BlockSpec((H, bk, DN), lambda i, j: (0, j, 0)),
                  pl.BlockSpec((bk, DR), lambda i, j: (j, 0)),
                  pl.BlockSpec((bk, half), lambda i, j: (j, 0)),
                  pl.BlockSpec((bk, half), lambda i, j: (j, 0)),
                  pl.BlockSpec((H, bk, DV), lambda i, j: (0, j, 0))],
        out_specs=pl.BlockSpec((H, bq, DV), lambda i, j: (0, i, 0)),
        out_shape=jax.ShapeDtypeStruct((H, S, DV), q.dtype),
        scratch_shapes=[pltpu.VMEM((H, bq, 1), _F32), pltpu.VMEM((H, bq, 1), _F32),
                        pltpu.VMEM((H, bq, DV), _F32)],
    )(q, cos, sin, k_nope, k_pe_raw, cos, sin, v)


def kernel(x, w_dq, q_norm, w_uq, w_dkv, kv_norm, w_uk, w_uv, w_kr, w_o):
    S = x.shape[0]
    H = w_uk.shape[1] // DN
    bk = None if PROJ_K == "t256" else x.shape[1] // 2  # the DM-deep contractions' step
    cq = _matmul(x, w_dq, q_norm, bk=bk)     # [S, QL], RMSNorm fused
    c = _matmul(x, w_dkv, kv_norm, bk=bk)    # [S, KVL], RMSNorm fused
    k_pe_raw = _matmul(x, w_kr, bk=bk)       # [S, DR], RoPE applied in the attention kernel
    q = _matmul(cq, w_uq, whole_k=True)      # [S, H*(DN+DR)]
    k_nope = _matmul(c, w_uk, whole_k=True)  # [S, H*DN]
    v = _matmul(c, w_uv, whole_k=True)       # [S, H*DV]
    # Heads-major layouts for the attention kernel (layout glue).
    q = q.reshape(S, H, DN + DR).transpose(1, 0, 2)
    k_nope = k_nope.reshape(S, H, DN).transpose(1, 0, 2)
    v = v.reshape(S, H, DV).transpose(1, 0, 2)
    # RoPE angles (elementwise on positions, as the reference computes them): [S, DR/2], cos/sin
    # rounded to bfloat16 as the workload rounds them.
    inv_freq = 1.0 / jnp.power(10000.0, jnp.arange(0, DR, 2, dtype=_F32) / DR)
    angle = jnp.arange(S, dtype=_F32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angle).astype(x.dtype), jnp.sin(angle).astype(x.dtype)
    o = _attention(q, k_nope, k_pe_raw, v, cos, sin)                          # [H, S, DV]
    o = o.transpose(1, 0, 2).reshape(S, H * DV)                               # heads concatenated
    DM = w_o.shape[1]
    return _matmul(o, w_o, bn=None if OUT_N == "t256" else DM // 2)  # [S, DM]
