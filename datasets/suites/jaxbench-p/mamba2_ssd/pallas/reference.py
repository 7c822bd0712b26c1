import jax
import jax.numpy as jnp


def reference(x, dt, A, Bm, Cm):
    # x [B, S, H, P], dt [B, S, H], A [H], Bm / Cm [B, S, N] -> y [B, S, H, P]
    # Dtypes as 16p_Mamba2_SSD: bfloat16 x, Bm, Cm and y, float32 dt and A; everything in float32
    # (products of bfloat16 values are exact) except M, rounded to bfloat16 for M . x.
    dtype = x.dtype
    x, Bm, Cm = (t.astype(jnp.float32) for t in (x, Bm, Cm))
    B, S, H, P = x.shape
    dA = jnp.transpose(dt * A[None, None, :], (0, 2, 1))    # [B, H, S]: dt[b, k, h] * A[h]
    cs = jnp.cumsum(dA, axis=-1)                              # running sum over positions
    idx = jnp.arange(S)
    upper = idx[:, None] < idx[None, :]                       # [i, j]: j > i
    dtT = jnp.transpose(dt, (0, 2, 1))                        # [B, H, S]
    xT = jnp.transpose(x, (0, 2, 1, 3))                       # [B, H, S, P]

    def one_batch(args):
        bm, cm, cs_b, dt_b, x_b = args
        cb = jnp.matmul(cm, bm.T)                             # CB[i, j] = Cm[i] . Bm[j], shared by every head

        def one_head(head):
            cs_h, dt_h, x_h = head
            # L[i, j] = exp(cs[i] - cs[j]) for j <= i, else 0; M = CB * L * dt[j]; y = M . x
            L = jnp.exp(jnp.where(upper, -jnp.inf, cs_h[:, None] - cs_h[None, :]))
            M = (cb * L * dt_h[None, :]).astype(dtype).astype(jnp.float32)
            return jnp.matmul(M, x_h)                         # [S, P]

        # heads a few at a time: all [H, S, S] decay matrices of the full shapes would not fit
        return jax.lax.map(one_head, (cs_b, dt_b, x_b), batch_size=8)      # [H, S, P]

    y = jax.lax.map(one_batch, (Bm, Cm, cs, dtT, xT))         # [B, H, S, P]
    return jnp.transpose(y, (0, 2, 1, 3)).astype(dtype)
