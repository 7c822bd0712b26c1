import jax
import jax.numpy as jnp

POOL = 16  # AvgPool1d kernel_size = stride = 16 over the feature dim


def reference(x, weight, bias):
    # torch.max(torch.gelu(torch.avg_pool1d(linear(x).unsqueeze(1), [16], [16]).squeeze(1)) * 2.0, 1)[0]
    z = jnp.dot(x, weight.T) + bias
    M, N = z.shape
    p = jnp.mean(z[:, : (N // POOL) * POOL].reshape(M, N // POOL, POOL), axis=2)
    p = jax.nn.gelu(p, approximate=False)
    p = p * 2.0
    return jnp.max(p, axis=1)
