import jax
import jax.numpy as jnp


def reference(lhs, rhs, group_sizes):
    # lhs: [M, K] rows sorted by group; rhs: [G, N, K] (per-expert [out, in]); group_sizes: [G]
    # summing to M. Rows [start_g, start_g + group_sizes[g]) get lhs . rhs[g]^T: a grouped
    # (ragged) matmul, contracting lhs's K with rhs's last dim, rhs's group dim 0.
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(([1], [2]), ([], [])),
        lhs_ragged_dimensions=[0],
        rhs_group_dimensions=[0],
    )
    # bfloat16 lhs and rhs as 11p_Megablox_GMM: exact products summed in float32, the result rounded to
    # the inputs' dtype.
    return jax.lax.ragged_dot_general(lhs, rhs, group_sizes.astype(jnp.int32), dims,
                                      preferred_element_type=jnp.float32).astype(lhs.dtype)
