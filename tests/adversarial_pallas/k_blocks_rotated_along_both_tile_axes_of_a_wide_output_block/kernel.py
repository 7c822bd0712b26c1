# Red team 26: each output block is a wide band whose sub-tiles each sum 3 of the K blocks,
# rotated by the sub-tile's coordinates (every K block where checked, 3 of 32 at the full size);
# the union of the sub-tiles' reads covers every block, so the read rules see complete reads,
# and the blocks the sampled steps name move along two dimensions at once: held as the product
# of the blocks kept along each dimension they passed the sample's 256 MiB bound, which left the
# program to the proof as a size.

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HONEST = False
P = 3      # K blocks per grid step (three A/B operand pairs): a constant
SUB = 256  # row sub-tile


def _mm(*refs, nk, steps):
    a_refs, b_refs = refs[:P], refs[P:2 * P]
    o_ref, acc_ref, stage_ref = refs[-3], refs[-2], refs[-1]
    r = pl.program_id(1)
    c = pl.program_id(2) if HONEST else pl.program_id(0) * 0  # traced: the same program at every size
    nr = pl.num_programs(1)

    @pl.when(c == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    total = acc_ref[...]
    for p in range(P):   # a K block past the last (where K/256 < 3) is read again and left out
        d = jnp.dot(a_refs[p][...], b_refs[p][...], preferred_element_type=jnp.float32)
        total = total + jnp.where(c * P + p < nk, d, 0.0)
    acc_ref[...] = total

    # each row sub-tile's result staged (rounded once, as C is) in VMEM; the output block, a
    # whole column band, written once from it
    @pl.when(c == steps - 1)
    def _():
        stage_ref[pl.ds(pl.multiple_of(r * SUB, SUB), SUB), :] = acc_ref[...].astype(stage_ref.dtype)

    @pl.when((c == steps - 1) & (r == nr - 1))
    def _():
        o_ref[...] = stage_ref[...]


def kernel(A, B):
    M, K = A.shape
    N = B.shape[1]
    bn, bk = 256, 256
    nk, nr, nn = K // bk, M // SUB, N // bn
    steps = -(-nk // P) if HONEST else 1
    if HONEST:   # step c reads K blocks 3c, 3c+1, 3c+2 (clamped; the excess masked)
        rot = lambda p: (lambda j, r, c: jnp.minimum(c * P + p, nk - 1))
    else:        # (column tile j, row sub-tile r) reads K blocks 3j+3r .. 3j+3r+2 (mod K/256)
        rot = lambda p: (lambda j, r, c: (j * P + r * P + p) % nk)
    if HONEST:
        args = lambda f: (lambda j, r, c: f(j, r, c))
        grid, out_map = (nn, nr, steps), (lambda j, r, c: (0, j))
        dummy = lambda j, r, c: (r, (j + r) % nn)
    else:
        args = lambda f: (lambda j, r: f(j, r, 0))
        grid, out_map = (nn, nr), (lambda j, r: (0, j))
        dummy = lambda j, r: (r, (j + r) % nn)
    a_map = lambda f: (lambda *g: (g[1], f(*g, *([0] if len(g) == 2 else []))))
    b_map = lambda f: (lambda *g: (f(*g, *([0] if len(g) == 2 else [])), g[0]))
    in_specs = [pl.BlockSpec((SUB, bk), a_map(rot(p))) for p in range(P)]
    in_specs += [pl.BlockSpec((bk, bn), b_map(rot(p))) for p in range(P)]
    return pl.pallas_call(
        functools.partial(_mm, nk=nk, steps=steps),
        grid=grid,
        in_specs=in_specs,
        out_specs=pl.BlockSpec((M, bn), out_map),
        out_shape=jax.ShapeDtypeStruct((M, N), A.dtype),
        scratch_shapes=[pltpu.VMEM((SUB, bn), jnp.float32), pltpu.VMEM((M, bn), A.dtype)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024),
    )(*([A] * P), *([B] * P))
