# The starter's two Pallas calls with their contraction depth as knobs (pallas.json "knobs"; an
# episode's `knobs` action prepends one `NAME = value` line per knob). Tiles stay 128 wide: 128 is
# the largest block dividing T, D and F at every size set (small, check and full), and the whole
# dimension is the only other rule that gives the same program at every set, so every setting's
# full-size program is proven the checked one (docs/pallas.md "What is paid is what was checked").
#   GATE_K  "tile": x @ Wg and x @ Wu summed over 128-deep D slices on an innermost grid axis;
#           "whole": each step contracts the whole D (a 64th of the grid steps at the full size)
#   DOWN_K  the same for h @ Wd over F (whole F: 7 MiB blocks at the full size, double-buffered;
#           hence the raised VMEM limit)
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
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def kernel(x, Wg, Wu, Wd):
    t, d = x.shape
    f = Wg.shape[1]
    bt, bd, bf = _tile(t), _tile(d), _tile(f)
    gate_k = d if GATE_K == "whole" else bd
    down_k = f if DOWN_K == "whole" else bf
    params = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                  vmem_limit_bytes=96 * 1024 * 1024)

    h = pl.pallas_call(
        _gate_up_block,
        grid=(t // bt, f // bf, d // gate_k),
        in_specs=[pl.BlockSpec((bt, gate_k), lambda i, j, k: (i, k)),
                  pl.BlockSpec((gate_k, bf), lambda i, j, k: (k, j)),
                  pl.BlockSpec((gate_k, bf), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bt, bf), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((t, f), x.dtype),
        scratch_shapes=[pltpu.VMEM((bt, bf), jnp.float32), pltpu.VMEM((bt, bf), jnp.float32)],
        compiler_params=params,
    )(x, Wg, Wu)

    return pl.pallas_call(
        _matmul_block,
        grid=(t // bt, d // bd, f // down_k),
        in_specs=[pl.BlockSpec((bt, down_k), lambda i, j, k: (i, k)),
                  pl.BlockSpec((down_k, bd), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bt, bd), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((t, d), x.dtype),
        scratch_shapes=[pltpu.VMEM((bt, bd), jnp.float32)],
        compiler_params=params,
    )(h, Wd)
