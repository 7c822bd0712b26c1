import jax.numpy as jnp
import numpy as np

# task.json draws pos ~ randint[0, 8192) (an 8192-token context): the table covers exactly those.
MAX_POS = 8192


def reference(q, k, pos):
    # Hugging Face Llama / GPT-NeoX rotary embedding (half-split layout), base 10000. The torch
    # reference forms the angles pos * base^(-2i/D) and their cos/sin in float64 and rounds them to
    # float32. JAX runs without float64 here, so the same float64 values come from a numpy table
    # of every position < MAX_POS (built at trace time, a constant), gathered by pos.
    D = q.shape[2]
    inv_freq = 1.0 / np.power(10000.0, np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(MAX_POS, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([ang, ang], axis=-1)
    cos_table = jnp.asarray(np.cos(emb).astype(np.float32))  # [MAX_POS, D]
    sin_table = jnp.asarray(np.sin(emb).astype(np.float32))
    # jnp.take's default mode fills out-of-range rows with NaN: a position >= MAX_POS could not
    # pass silently
    cos = jnp.take(cos_table, pos, axis=0)[:, None, :]  # [T, 1, D]
    sin = jnp.take(sin_table, pos, axis=0)[:, None, :]

    def rotate_half(x):
        half = x.shape[-1] // 2
        return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)

    # bfloat16 q and k (as served): rotated in float32, each output rounded once to the inputs' dtype.
    qf, kf = q.astype(jnp.float32), k.astype(jnp.float32)
    q_out = qf * cos + rotate_half(qf) * sin
    k_out = kf * cos + rotate_half(kf) * sin
    return q_out.astype(q.dtype), k_out.astype(k.dtype)
