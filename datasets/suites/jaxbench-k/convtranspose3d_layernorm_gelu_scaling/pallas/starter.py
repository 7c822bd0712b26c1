import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# Two naive passes.
# 1. ConvTranspose3d (kernel 4, stride 2, padding 1) by stride phases. Output index
#    o = 2 * j + r (r = 0 or 1 per dim) receives, per dim, exactly two taps: with x padded by
#    one on each side (xp[i + 1] = x[i]), the tap t = 0, 1 reads xp[j + r + t] with kernel
#    index k = 3 - r - 2t. So each of the 8 phases (rd, rh, rw) is a 2x2x2 convolution of xp.
#    Layout: each padded volume (Dp, Hp, Wp) = (D+2, H+2, W+2) is flattened onto the lane axis;
#    phase output position p = jd*Hp*Wp + jh*Wp + jw reads xp at p + offset with
#    offset = (rd+td)*Hp*Wp + (rh+th)*Wp + (rw+tw). Positions are computed for all Hp x Wp
#    positions of the first D planes (jh >= H, jw >= W are junk, sliced off afterwards) in
#    chunks of CHUNK lanes: grid (N, chunks). A chunk needs xp up to 2*Hp*Wp + 2*Wp + 2 lanes
#    past its end, so each step also gets the following chunk(s) of xp as extra blocks of the
#    same array (the halo); the kernel joins them and, per phase and tap, takes the lane slice
#    at the offset:   out[phase][Cout, CHUNK] += w_tap [Cout, Cin] @ xp_slice [Cin, CHUNK]
#    The 8 phase outputs are interleaved into [N, Cout, 2D, 2H, 2W] outside (layout glue).
# 2. LayerNorm over the last dim (2W values per row: two-pass mean and biased variance, affine
#    by position), exact (erf) GELU, * 1.0, on [Cout, 2H, 2W] blocks (one (n, od) each) of the
#    5-D result. The blocks index the 5-D array directly: viewing it as [rows, 2W] instead
#    made XLA materialize the interleave with the 2-wide phase dims innermost, i.e. GiBs of
#    TPU tile padding (4.4 GB of temporaries at the full shapes, against 0.27 GB this way).
# Blocks: xp [Cin, 512], phase outputs [8, Cout, 512] float32 (1 MiB at Cout=64), LayerNorm
# blocks [64, 16, 64] (256 KiB): a few MiB of VMEM.
CHUNK = 512
EPS = 1e-5
HI = jax.lax.Precision.HIGHEST


def _convt_phases(offsets, n_halo, *refs):
    x_refs = refs[:n_halo]
    w_ref, o_ref = refs[n_halo:]
    xs = jnp.concatenate([r[0] for r in x_refs], axis=1) if n_halo > 1 else x_refs[0][0]
    for phase, phase_offsets in enumerate(offsets):
        acc = None
        for t, off in enumerate(phase_offsets):
            part = jnp.dot(w_ref[phase, t], xs[:, off:off + CHUNK],
                           preferred_element_type=jnp.float32, precision=HI)
            acc = part if acc is None else acc + part
        o_ref[0, phase] = acc.astype(o_ref.dtype)


def _layernorm_gelu(y_ref, g_ref, b_ref, o_ref):
    y = y_ref[...]                                   # [Cout, 2H, 2W] of one (n, od)
    d = y - jnp.mean(y, axis=2, keepdims=True)
    var = jnp.mean(d * d, axis=2, keepdims=True)
    v = d * jax.lax.rsqrt(var + EPS) * g_ref[...] + b_ref[...]
    g = 0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))
    o_ref[...] = (g * 1.0).astype(o_ref.dtype)


def kernel(x, weight, ln_weight, ln_bias):
    n, cin, d, h, w = x.shape
    cout = weight.shape[1]
    dp, hp, wp = d + 2, h + 2, w + 2
    plane = hp * wp
    offsets = [[(rd + td) * plane + (rh + th) * wp + (rw + tw)
                for td in range(2) for th in range(2) for tw in range(2)]
               for rd in range(2) for rh in range(2) for rw in range(2)]
    max_off = max(max(o) for o in offsets)
    chunks = -(-(d * plane) // CHUNK)
    n_halo = 1 + -(-max_off // CHUNK)           # this chunk plus enough following ones
    length = (chunks + n_halo - 1) * CHUNK
    xp = jnp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1))).reshape(n, cin, dp * plane)
    xp = jnp.pad(xp, ((0, 0), (0, 0), (0, length - dp * plane)))
    # taps[phase, tap] = weight[:, :, k_d, k_h, k_w].T with k = 3 - r - 2t, i.e. flipped index
    # 3 - k = 2t + r: flip the kernel, split each dim of 4 into (t, r), phases outermost.
    wf = jnp.flip(weight, axis=(2, 3, 4)).reshape(cin, cout, 2, 2, 2, 2, 2, 2)
    taps = wf.transpose(3, 5, 7, 2, 4, 6, 1, 0).reshape(8, 8, cout, cin)

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, e=e: (b, 0, c + e))
               for e in range(n_halo)]
    phases = pl.pallas_call(
        lambda *refs: _convt_phases(offsets, n_halo, *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0, 0))],
        out_specs=pl.BlockSpec((1, 8, cout, CHUNK), lambda b, c: (b, 0, 0, c)),
        out_shape=jax.ShapeDtypeStruct((n, 8, cout, chunks * CHUNK), jnp.float32),
    )(*([xp] * n_halo), taps)

    # interleave the phases: [N, rd, rh, rw, Cout, D, H, W] -> [N, Cout, D, rd, H, rh, W, rw]
    y = phases[:, :, :, :d * plane].reshape(n, 2, 2, 2, cout, d, hp, wp)[..., :h, :w]
    od, oh, ow = 2 * d, 2 * h, 2 * w
    y = y.transpose(0, 4, 5, 1, 6, 2, 7, 3).reshape(n, cout, od, oh, ow)
    whole = pl.BlockSpec((1, 1, ow), lambda b, p: (0, 0, 0))
    block = pl.BlockSpec((None, cout, None, oh, ow), lambda b, p: (b, 0, p, 0, 0))
    return pl.pallas_call(
        _layernorm_gelu,
        grid=(n, od),
        in_specs=[block, whole, whole],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((n, cout, od, oh, ow), x.dtype),
    )(y, ln_weight.reshape(1, 1, ow), ln_bias.reshape(1, 1, ow))
