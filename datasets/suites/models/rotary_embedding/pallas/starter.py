import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# task.json draws pos ~ randint[0, 8192) (an 8192-token context). The angles must be as accurate
# as float64 (float32 angles are off by up to 5e-4 rad at position 8191), so, like Hugging Face's
# cos_cached / sin_cached buffers, the starter builds a cos/sin table of every position < MAX_POS
# in float64 with numpy at trace time and looks up row pos[t] for token t.
MAX_POS = 8192


def _rope_token(pos_ref, q_ref, k_ref, cos_ref, sin_ref, qo_ref, ko_ref):
    # One token (grid step t): the cos/sin rows of pos[t] (picked by the index maps) applied to
    # all its query and key heads. rotate_half(x) = [-x2, x1] is a roll by D/2 (= [x2, x1]) times
    # the sign folded into the sin row ([-s, s]).
    c = cos_ref[0]  # (1, D)
    s = sin_ref[0]  # (1, D), first half negated
    half = q_ref.shape[-1] // 2
    q = q_ref[0].astype(jnp.float32)  # (Hq, D), rotated in float32
    k = k_ref[0].astype(jnp.float32)  # (Hk, D)
    qo_ref[0] = (q * c + pltpu.roll(q, half, 1) * s).astype(qo_ref.dtype)
    ko_ref[0] = (k * c + pltpu.roll(k, half, 1) * s).astype(ko_ref.dtype)


def kernel(q, k, pos):
    T, Hq, D = q.shape
    Hk = k.shape[1]
    inv_freq = 1.0 / np.power(10000.0, np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(MAX_POS, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos_table = np.cos(np.concatenate([ang, ang], axis=-1)).astype(np.float32)
    sin_table = np.sin(np.concatenate([-ang, ang], axis=-1)).astype(np.float32)  # sign of rotate_half
    # (MAX_POS, 1, D): a (1, 1, D) block's last two dims equal the array's, so one row is legal
    cos_table = jnp.asarray(cos_table.reshape(MAX_POS, 1, D))
    sin_table = jnp.asarray(sin_table.reshape(MAX_POS, 1, D))
    row = pl.BlockSpec((1, 1, D), lambda t, p: (p[t], 0, 0))  # the table row of token t's position
    q_spec = pl.BlockSpec((1, Hq, D), lambda t, p: (t, 0, 0))
    k_spec = pl.BlockSpec((1, Hk, D), lambda t, p: (t, 0, 0))
    return pl.pallas_call(
        _rope_token,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,  # pos, in SMEM, read by the table index maps
            grid=(T,),  # naive: one token per step
            in_specs=[q_spec, k_spec, row, row],
            out_specs=(q_spec, k_spec)),
        out_shape=(jax.ShapeDtypeStruct((T, Hq, D), q.dtype), jax.ShapeDtypeStruct((T, Hk, D), k.dtype)),
    )(pos.astype(jnp.int32), q, k, cos_table, sin_table)
