# The starter's three-call triangle multiplication with its decisions as knobs (pallas.json
# "knobs"; an episode's `knobs` action prepends one `NAME = value` line per knob). A block is the
# starter's constant or a whole dimension, so every setting's full-size program is proven the
# checked one (docs/pallas.md "What is paid is what was checked").
#   TRI_K      the contraction's step in the N^3 product (call 2): "t128" 128 deep (the starter's)
#              or "whole" (all of N, 1536 at the full size): no k axis, 12x fewer grid steps at the
#              full size, each channel's (128, N) x (N, 128) product one MXU pass over its blocks
#   ROWS_PER_STEP  pair rows per grid step of the per-row calls 1 and 3 (LayerNorms, projections,
#              gates): "r512" (the starter's ROWS) or "r2048" (4x fewer steps, 1,152 at the full
#              size; 2048 divides every size set's N^2), with a raised scoped-VMEM limit: the
#              HIGHEST float32 dots' temporaries overflow the default one at 2048 rows
# Tried and left out: the projections at Precision.HIGH (three bfloat16 passes instead of six):
# Mosaic refuses it ("Unsupported dot precision: HIGH").
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# bfloat16 inputs and output (17p's dtypes). The projections run on float32 values at HIGHEST (a
# float32 dot at DEFAULT is one bfloat16 pass on a TPU, docs/pallas.md); the N^3 contraction feeds
# the MXU the bfloat16 a and b and accumulates in float32.
_EXACT = jax.lax.Precision.HIGHEST

# Naive AlphaFold2 triangle multiplication (outgoing), in three Pallas calls:
#   1. per pair row: zl = LayerNorm(z); a, b = gated projections of zl          [N*N, CH] bf16 each
#   2. per channel: t[:, :, c] = A_c @ B_c^T, A_c[i, k] = a[i, k, c]           on [CH, N, N] layouts, t f32
#   3. per pair row: out = sigmoid(LayerNorm(z) @ Wg + bg) * (LayerNorm(t) @ Wo + bo)
# The transposes between them (channel-last <-> channel-first) are plain layout glue.
ROWS = 512   # pair rows per grid step in 1 and 3: 512 x C floats (at HIGHEST, 2048 rows overflowed VMEM)
TILE = 128   # i/j/k tile of the per-channel products in 2 (the whole N when it is smaller)
CHANS = 8    # channels per grid step in 2, one 2D product each


def _layer_norm(x, w, b):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * w + b


def _sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))


def _f32(ref):
    return ref[...].astype(jnp.float32)


def _project_block(z_ref, lnw_ref, lnb_ref, w_ref, bias_ref, a_ref, b_ref):
    zl = _layer_norm(_f32(z_ref), _f32(lnw_ref), _f32(lnb_ref))
    w, bias = _f32(w_ref), _f32(bias_ref)
    proj = [jnp.dot(zl, w[p], preferred_element_type=jnp.float32, precision=_EXACT) + bias[p:p + 1, :]
            for p in range(4)]
    a_ref[...] = (_sigmoid(proj[1]) * proj[0]).astype(a_ref.dtype)
    b_ref[...] = (_sigmoid(proj[3]) * proj[2]).astype(b_ref.dtype)


def _triangle_block(a_ref, b_ref, t_ref):
    @pl.when(pl.program_id(3) == 0)
    def _():
        t_ref[...] = jnp.zeros_like(t_ref)

    for c in range(a_ref.shape[0]):
        # bfloat16 operands (exact products), float32 sums
        t_ref[c] += jax.lax.dot_general(a_ref[c], b_ref[c], (((1,), (1,)), ((), ())),
                                        preferred_element_type=jnp.float32)


def _output_block(z_ref, t_ref, lnw_ref, lnb_ref, wg_ref, bg_ref, lnow_ref, lnob_ref, wo_ref, bo_ref,
                  o_ref):
    zl = _layer_norm(_f32(z_ref), _f32(lnw_ref), _f32(lnb_ref))
    gate = _sigmoid(jnp.dot(zl, _f32(wg_ref), preferred_element_type=jnp.float32, precision=_EXACT) + _f32(bg_ref))
    tl = _layer_norm(t_ref[...], _f32(lnow_ref), _f32(lnob_ref))
    out = gate * (jnp.dot(tl, _f32(wo_ref), preferred_element_type=jnp.float32, precision=_EXACT) + _f32(bo_ref))
    o_ref[...] = out.astype(o_ref.dtype)


def _whole(shape):
    # a block that is the whole (small) parameter array, the same at every grid step
    return pl.BlockSpec(shape, lambda *idx: (0,) * len(shape))


def kernel(z, ln_in_w, ln_in_b, W_ab, b_ab, ln_out_w, ln_out_b, Wo, bo, Wg, bg):
    n, _, c = z.shape
    ch = Wo.shape[0]
    r = n * n
    br = min(r, ROWS if ROWS_PER_STEP == "r512" else 2048)
    rows_params = None if ROWS_PER_STEP == "r512" else pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024)
    assert r % br == 0, r
    z2 = z.reshape(r, c)
    vec = lambda x: x.reshape(1, -1)  # 1D parameters as (1, len) rows for Mosaic
    rows = lambda width: pl.BlockSpec((br, width), lambda i: (i, 0))

    a, b = pl.pallas_call(
        _project_block,
        grid=(r // br,),
        in_specs=[rows(c), _whole((1, c)), _whole((1, c)), _whole((4, c, ch)), _whole((4, ch))],
        out_specs=[rows(ch), rows(ch)],
        out_shape=[jax.ShapeDtypeStruct((r, ch), z.dtype)] * 2,
        compiler_params=rows_params,
    )(z2, vec(ln_in_w), vec(ln_in_b), W_ab, b_ab)

    # channel-first: a_t[c, i, k] = a[i, k, c], b_t[c, j, k] = b[j, k, c]
    a_t = a.reshape(n, n, ch).transpose(2, 0, 1)
    b_t = b.reshape(n, n, ch).transpose(2, 0, 1)
    bt, bc = min(n, TILE), min(ch, CHANS)
    bk = bt if TRI_K == "t128" else n
    assert n % bt == 0 and ch % bc == 0, (n, ch)
    t_t = pl.pallas_call(
        _triangle_block,
        grid=(ch // bc, n // bt, n // bt, n // bk),
        in_specs=[pl.BlockSpec((bc, bt, bk), lambda cc, i, j, k: (cc, i, k)),
                  pl.BlockSpec((bc, bt, bk), lambda cc, i, j, k: (cc, j, k))],
        out_specs=pl.BlockSpec((bc, bt, bt), lambda cc, i, j, k: (cc, i, j)),
        out_shape=jax.ShapeDtypeStruct((ch, n, n), jnp.float32),
        # The starter's blocks fit the default scoped VMEM; whole-N blocks of a and b are 3 MiB
        # each at the full size, double-buffered.
        compiler_params=None if TRI_K == "t128" else pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024),
    )(a_t, b_t)
    t = t_t.transpose(1, 2, 0).reshape(r, ch)

    out = pl.pallas_call(
        _output_block,
        grid=(r // br,),
        in_specs=[rows(c), rows(ch), _whole((1, c)), _whole((1, c)), _whole((c, c)), _whole((1, c)),
                  _whole((1, ch)), _whole((1, ch)), _whole((ch, c)), _whole((1, c))],
        out_specs=rows(c),
        out_shape=jax.ShapeDtypeStruct((r, c), z.dtype),
        compiler_params=rows_params,
    )(z2, t, vec(ln_in_w), vec(ln_in_b), Wg, vec(bg), vec(ln_out_w), vec(ln_out_b), Wo, vec(bo))
    return out.reshape(n, n, c)
