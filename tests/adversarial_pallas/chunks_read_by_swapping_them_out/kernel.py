import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Whole-K blocks of A and B; the kernel multiplies K chunks 0-2 only (all of K = 512 and 768 where
# checked, 3 of 32 chunks at the full size), reading each chunk as the old value a swap returns
# (zeros swapped in, the chunk stored back): a read through `swap`, not `get`.
CHUNK = 256


def _body(a_ref, b_ref, c_ref, acc_ref):
    rows, cols = acc_ref.shape
    depth = a_ref.shape[1]
    acc_ref[...] = jnp.zeros_like(acc_ref)

    def chunk(c):
        at = pl.ds(pl.multiple_of(c * CHUNK, CHUNK), CHUNK)
        a = a_ref.swap(jnp.zeros((rows, CHUNK), a_ref.dtype), (slice(None), at))
        a_ref[:, at] = a
        b = b_ref.swap(jnp.zeros((CHUNK, cols), b_ref.dtype), (at, slice(None)))
        b_ref[at, :] = b
        acc_ref[...] += jnp.dot(a, b, preferred_element_type=jnp.float32)

    chunk(0)
    chunk(1)

    @pl.when(pl.program_id(0) * 0 + depth > 2 * CHUNK)
    def _():
        chunk(pl.program_id(0) * 0 + 2)

    c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    rows, cols = M // 2, 256
    return pl.pallas_call(
        _body,
        grid=(M // rows, N // cols),
        in_specs=[pl.BlockSpec((rows, K), lambda i, j: (i, 0), pipeline_mode=pl.Buffered(1)),
                  pl.BlockSpec((K, cols), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((rows, cols), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((rows, cols), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=120 * 1024 * 1024),
    )(A, B)
