import jax
import jax.numpy as jnp


def _one_head(qkv):
    # q, k, v: [S, D] for one (batch, head): causal softmax(q k^T / sqrt(D)) v, full S x S scores.
    # bfloat16 inputs (1p_Flash_Attention's dtype): scores and softmax in float32 (the products of
    # bfloat16 values are exact), the probabilities rounded to bfloat16 for P.V as a TPU kernel
    # feeds the MXU, the output rounded to the inputs' dtype.
    dtype = qkv[0].dtype
    q, k, v = (x.astype(jnp.float32) for x in qkv)
    S, D = q.shape
    scale = 1.0 / (float(D) ** 0.5)
    scores = jnp.matmul(q, k.T) * scale
    pos = jnp.arange(S)
    future = pos[None, :] > pos[:, None]  # [i, j]: key j after query i (masked out)
    scores = jnp.where(future, -jnp.inf, scores)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype).astype(jnp.float32)
    return jnp.matmul(p, v).astype(dtype)


def reference(q, k, v):
    # q, k, v: [B, H, S, D]. Heads are independent; they are mapped a few at a time so that the
    # S x S score matrices of the full shapes (18 GB for all 256 heads at once) fit a 16 GiB HBM.
    B, H, S, D = q.shape
    flat = lambda x: x.reshape(B * H, S, D)
    o = jax.lax.map(_one_head, (flat(q), flat(k), flat(v)), batch_size=8)
    return o.reshape(B, H, S, D)
