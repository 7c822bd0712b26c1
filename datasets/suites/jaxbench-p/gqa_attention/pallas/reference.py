import jax
import jax.numpy as jnp


def _one_group(qkv):
    # q: [S, G, D], the G query heads that share kv head k, v: [S, D]; causal attention per head.
    # bfloat16 inputs (the workload's dtype): scores and softmax in float32 (products of bfloat16
    # values are exact), the probabilities rounded to bfloat16 for P.V as a TPU kernel feeds the MXU,
    # the output rounded to the inputs' dtype.
    dtype = qkv[0].dtype
    q, k, v = (x.astype(jnp.float32) for x in qkv)
    S, G, D = q.shape
    scale = 1.0 / (float(D) ** 0.5)
    scores = jnp.einsum("igd,jd->gij", q, k) * scale     # [G, S, S]
    pos = jnp.arange(S)
    future = pos[None, :] > pos[:, None]                # [i, j]: key j after query i (masked out)
    scores = jnp.where(future[None], -jnp.inf, scores)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype).astype(jnp.float32)
    return jnp.einsum("gij,jd->igd", p, v).astype(dtype)              # [S, G, D]


def reference(q, k, v):
    # q: [B, S, HQ, D]; k, v: [B, S, HKV, D]; query head h reads kv head h // G, G = HQ / HKV
    # (the reference's repeat_interleave order: query heads h = kvh * G .. kvh * G + G - 1).
    # Computed one (batch, kv head) group at a time so that the full shapes' S x S scores
    # (34 GB for all heads at once) fit a 16 GiB HBM; the math per head is unchanged.
    B, S, HQ, D = q.shape
    HKV = k.shape[2]
    G = HQ // HKV
    qg = q.reshape(B, S, HKV, G, D).transpose(0, 2, 1, 3, 4).reshape(B * HKV, S, G, D)
    kg = k.transpose(0, 2, 1, 3).reshape(B * HKV, S, D)
    vg = v.transpose(0, 2, 1, 3).reshape(B * HKV, S, D)
    o = jax.lax.map(_one_group, (qg, kg, vg))            # [B * HKV, S, G, D]
    return o.reshape(B, HKV, S, G, D).transpose(0, 2, 1, 3, 4).reshape(B, S, HQ, D)
