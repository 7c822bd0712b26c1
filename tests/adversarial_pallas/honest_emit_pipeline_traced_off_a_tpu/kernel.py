# An honest GEMM whose kernel walks K with pltpu.emit_pipeline. Pallas asks the default device for
# the chip's facts while it is traced; off a TPU that was the CPU ("Unsupported TPU device kind:
# cpu"): a compile error for an honest kernel (red team, round 14). The tracer now answers as the
# target chip. Its estimate stays untrusted (emit_pipeline's own index arithmetic, M/256 - 1, is a
# number the proof does not read as one that follows the sizes: docs/pallas.md).
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Honest: an inner pltpu.emit_pipeline over all K/256 steps


def _body(a_hbm, b_hbm, c_ref, acc_ref, *, kb):
    i, j = pl.program_id(0), pl.program_id(1)
    bm, bn = c_ref.shape
    acc_ref[...] = jnp.zeros_like(acc_ref)

    def inner(a_ref, b_ref):
        k = pl.program_id(0)

        @pl.when(k < kb)
        def _():
            acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    pltpu.emit_pipeline(
        inner, grid=(kb,),
        in_specs=[pl.BlockSpec((bm, 256), lambda k: (i, k)),
                  pl.BlockSpec((256, bn), lambda k: (k, j))],
    )(a_hbm, b_hbm)
    c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bm, bn = 256, 256
    kb = K // 256
    return pl.pallas_call(
        functools.partial(_body, kb=kb),
        grid=(M // bm, N // bn),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024),
    )(A, B)
