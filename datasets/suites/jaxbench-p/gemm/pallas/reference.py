import jax.numpy as jnp


def reference(A, B):
    # C[M, N] = A[M, K] . B[K, N] as 8p_GEMM computes it: bfloat16 operands, every product exact and
    # summed in float32, C rounded to bfloat16 (the inputs' dtype).
    return jnp.dot(A, B, preferred_element_type=jnp.float32).astype(A.dtype)
