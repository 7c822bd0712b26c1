import jax
import jax.numpy as jnp

W = 128  # sliding window: query i sees keys i - W < j <= i (fixed, not a size)


def reference(q, k, v):
    # Causal sliding-window GQA, as the torch reference: blocks of W query rows against the keys
    # of the previous and the same block, -inf outside the window, softmax, @ v. All blocks are
    # done in one batched product: block c's keys are [prev block, own block], the (nonexistent)
    # block before the first is zero padding, masked out like every key outside the window.
    # bfloat16 inputs (the workload's dtype): scores and softmax in float32 (products of bfloat16
    # values are exact), the probabilities rounded to bfloat16 for P.V as a TPU kernel feeds the MXU,
    # the output rounded to the inputs' dtype.
    dtype = q.dtype
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    HQ, S, D = q.shape
    G = HQ // k.shape[0]
    kh = jnp.repeat(k, G, axis=0)  # [HQ, S, D], head h reads kv head h // G
    vh = jnp.repeat(v, G, axis=0)
    nb = -(-S // W)
    pad = nb * W - S
    qp = jnp.pad(q, ((0, 0), (0, pad), (0, 0))).reshape(HQ, nb, W, D)
    kp = jnp.pad(kh, ((0, 0), (W, pad), (0, 0)))  # one zero block in front
    vp = jnp.pad(vh, ((0, 0), (W, pad), (0, 0)))
    kb = jnp.concatenate([kp[:, :-W].reshape(HQ, nb, W, D), kp[:, W:].reshape(HQ, nb, W, D)], axis=2)
    vb = jnp.concatenate([vp[:, :-W].reshape(HQ, nb, W, D), vp[:, W:].reshape(HQ, nb, W, D)], axis=2)
    scale = 1.0 / (float(D) ** 0.5)
    scores = jnp.einsum("hcqd,hckd->hcqk", qp, kb) * scale          # [HQ, nb, W, 2W]
    qi = jnp.arange(nb)[:, None, None] * W + jnp.arange(W)[None, :, None]            # query position
    kj = jnp.arange(nb)[:, None, None] * W - W + jnp.arange(2 * W)[None, None, :]     # key position
    dist = qi - kj
    inside = (dist >= 0) & (dist < W) & (kj >= 0)
    scores = jnp.where(inside[None], scores, -jnp.inf)
    p = jax.nn.softmax(scores, axis=-1).astype(dtype).astype(jnp.float32)
    o = jnp.einsum("hcqk,hckd->hcqd", p, vb).reshape(HQ, nb * W, D)
    return o[:, :S].astype(dtype)
