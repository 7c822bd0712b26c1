import jax
import jax.numpy as jnp


def reference(x, Wg, Wu, Wd):
    # As 9p_SwiGLU_MLP in the inputs' dtype (bfloat16): each dot sums exact products in float32 and
    # rounds to bfloat16; silu and the gating product are bfloat16 operations.
    def dot(a, b):
        return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)
    h = jax.nn.silu(dot(x, Wg)) * dot(x, Wu)
    return dot(h, Wd)
