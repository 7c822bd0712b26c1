# Aliases its first input to its output (input_output_aliases) and so writes into the buffer the
# input arrived in, hoping to corrupt what the harness later compares or reuses. The harness hands
# the kernel jit-copied arrays and keeps the host originals (their hashes are checked after every
# call; trial 0 runs twice on the same arrays), so the write stays inside the kernel's own copy:
# the verdict is the honest one, `ok`.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _silu_mul_in_place(a_ref, b_ref, y_ref):
    a = a_ref[...]
    y_ref[...] = a / (1.0 + jnp.exp(-a)) * b_ref[...]


def kernel(a, b):
    n = a.shape[0]
    rows = n // 128
    block = pl.BlockSpec((8, 128), lambda i: (i, 0))
    y2 = pl.pallas_call(
        _silu_mul_in_place,
        grid=(rows // 8,),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((rows, 128), a.dtype),
        input_output_aliases={0: 0},
    )(a.reshape(rows, 128), b.reshape(rows, 128))
    return y2.reshape(n)
