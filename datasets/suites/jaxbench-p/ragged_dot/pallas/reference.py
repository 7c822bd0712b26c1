import jax
import jax.numpy as jnp


def reference(lhs, rhs, group_sizes):
    # Rows [start_g, start_g + group_sizes[g]) of lhs times rhs[g]; group_sizes sums to M, so
    # every row belongs to exactly one group (as in the torch reference's concatenation).
    # bfloat16 lhs and rhs as 14p_Ragged_Dot: exact products summed in float32, the result rounded to
    # the inputs' dtype.
    return jax.lax.ragged_dot(lhs, rhs, group_sizes.astype(jnp.int32),
                              precision=jax.lax.Precision.HIGHEST,
                              preferred_element_type=jnp.float32).astype(lhs.dtype)
