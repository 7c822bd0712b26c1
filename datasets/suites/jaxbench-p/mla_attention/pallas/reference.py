import jax
import jax.numpy as jnp

# 3p_MLA_Attention's dtypes: bfloat16 inputs and output; every dot takes bfloat16 operands (exact
# products), sums in float32 and rounds its result to bfloat16 (JAXBench's jnp.dot on bfloat16
# values returns bfloat16); the RMSNorm statistics, RoPE's arithmetic, the scores and the softmax
# in float32; RoPE's cos/sin rounded to bfloat16 (the workload casts them); the probabilities
# rounded to bfloat16 for P.V.
_F32 = jnp.float32


def _dot(a, b, dtype):
    # bfloat16 x bfloat16 products are exact in float32: the float32 sum is what the MXU computes
    return jnp.matmul(a, b, preferred_element_type=_F32).astype(dtype)


def _rms_norm(x, w):
    # RMSNorm over the last dimension, eps 1e-6: the statistics in float32, the normalized row
    # rounded to bfloat16, then scaled by w in bfloat16 (a second rounding), as 12p's RMSNorm
    xf = x.astype(_F32)
    normed = (xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-6)).astype(x.dtype)
    return normed * w


def _rope(x, cos, sin):
    # half-split pairs: element t rotates with element t + R/2 by the angle cos/sin[s, t]; the
    # rotation in float32 on the bfloat16 values, rounded once
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].astype(_F32), x[..., half:].astype(_F32)
    cos, sin = cos.astype(_F32), sin.astype(_F32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _latent(x, w):
    # The DM-deep down-projection, kept out of the RMSNorm's fusion: fused, XLA's deviceless TPU
    # compile of the product with the row reduction spent minutes in bundle packing at the full
    # sizes. The barrier changes no value, only where XLA may fuse.
    return jax.lax.optimization_barrier(_dot(x, w, x.dtype))


def reference(x, w_dq, q_norm, w_uq, w_dkv, kv_norm, w_uk, w_uv, w_kr, w_o):
    # x: [S, DM]; every weight is [in, out] (y = x @ W)
    dtype = x.dtype
    S = x.shape[0]
    DR = w_kr.shape[1]
    H = (w_uq.shape[1] - w_uk.shape[1]) // DR
    DN = w_uk.shape[1] // H
    DV = w_uv.shape[1] // H
    # queries: down-projection, RMSNorm, up-projection to H heads of [nope DN | rope DR]
    q = _dot(_rms_norm(_latent(x, w_dq), q_norm), w_uq, dtype).reshape(S, H, DN + DR).transpose(1, 0, 2)
    q_nope, q_pe = q[:, :, :DN], q[:, :, DN:]                      # [H, S, DN], [H, S, DR]
    # keys / values from the shared kv latent c
    c = _rms_norm(_latent(x, w_dkv), kv_norm)                      # [S, KVL]
    k_nope = _dot(c, w_uk, dtype).reshape(S, H, DN).transpose(1, 0, 2)
    v = _dot(c, w_uv, dtype).reshape(S, H, DV).transpose(1, 0, 2)
    # RoPE, base 10000, positions 0..S-1; cos/sin computed in float32 and rounded to bfloat16
    inv_freq = 1.0 / jnp.power(10000.0, jnp.arange(0, DR, 2, dtype=_F32) / DR)
    angle = jnp.arange(S, dtype=_F32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angle).astype(dtype), jnp.sin(angle).astype(dtype)   # [S, DR/2]
    k_pe = _rope(_dot(x, w_kr, dtype), cos, sin)                   # [S, DR], shared by every head
    q_pe = _rope(q_pe, cos, sin)
    scale = 1.0 / (float(DN + DR) ** 0.5)
    scores = (jnp.matmul(q_nope, jnp.swapaxes(k_nope, 1, 2), preferred_element_type=_F32)
              + jnp.matmul(q_pe, k_pe.T, preferred_element_type=_F32)) * scale
    pos = jnp.arange(S)
    future = pos[None, :] > pos[:, None]                           # [i, j]: key j after query i
    scores = jnp.where(future, -jnp.inf, scores)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype)              # float32 softmax, bfloat16 for P.V
    o = _dot(p, v, dtype).transpose(1, 0, 2).reshape(S, H * DV)    # heads concatenated: [S, H*DV]
    return _dot(o, w_o, dtype)
