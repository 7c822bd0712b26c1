import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Two naive passes.
# 1. Direct 3x3 convolution (stride 1, no padding) in NCHW as 9 shifted matmuls, storing the
#    conv output and accumulating each (n, channel) plane's sum and sum of squares.
#    Layout: each image's H x W plane is flattened onto the lane axis, so output position
#    p = oh * W + ow reads input positions p + kh * W + kw. Output positions are computed for
#    all W columns of the first OH rows in chunks of CHUNK lanes: grid (N, chunks), chunks
#    innermost. A chunk needs the input from p to p + 2W + 2, so each step also gets the
#    following chunk(s) of x as extra blocks of the same array (the halo); the kernel joins
#    them and, per tap, takes the lane slice at offset kh * W + kw:
#        acc[Cout, CHUNK] += weight[:, :, kh, kw] [Cout, Cin] @ x_slice [Cin, CHUNK]
#    A 0/1 mask (built outside) keeps the junk columns ow >= OW and the padding rows out of
#    the statistics. The sums are taken of conv - ref, with ref the plane's mean over its
#    first chunk, so that E[d^2] - E[d]^2 in float32 does not cancel away the variance when a
#    plane's mean is large next to its spread. The last chunk of an image turns them into the
#    plane's mean and scale = 1 / sqrt(var + eps) / 2 (the / 2.0 folded in).
# 2. y = (conv - mean) * scale per chunk; the junk columns are sliced off outside.
# Blocks are [Cin, 512] / [Cout, 512] float32 (256 KiB at Cout=128), well within VMEM.
CHUNK = 512
EPS = 1e-5
HI = jax.lax.Precision.HIGHEST


def _conv_chunk(x_refs, w_ref, offsets):
    """acc[Cout, CHUNK] = sum over taps t of w[t] @ x[:, off_t : off_t + CHUNK]."""
    xs = jnp.concatenate([r[0] for r in x_refs], axis=1) if len(x_refs) > 1 else x_refs[0][0]
    acc = None
    for t, off in enumerate(offsets):
        part = jnp.dot(w_ref[t], xs[:, off:off + CHUNK], preferred_element_type=jnp.float32,
                       precision=HI)
        acc = part if acc is None else acc + part
    return acc


def _conv_stats(offsets, n_halo, count, *refs):
    x_refs = refs[:n_halo]
    w_ref, mask_ref, c_ref, mean_ref, scale_ref, ref_ref, sum_ref, sq_ref = refs[n_halo:]
    c = pl.program_id(1)

    acc = _conv_chunk(x_refs, w_ref, offsets)
    c_ref[0] = acc
    mask = mask_ref[...]

    @pl.when(c == 0)
    def _init():
        ref_ref[...] = jnp.sum(acc * mask, axis=1, keepdims=True) / jnp.sum(mask)
        sum_ref[...] = jnp.zeros_like(sum_ref)
        sq_ref[...] = jnp.zeros_like(sq_ref)

    dev = (acc - ref_ref[...]) * mask
    sum_ref[...] += jnp.sum(dev, axis=1, keepdims=True)
    sq_ref[...] += jnp.sum(dev * dev, axis=1, keepdims=True)

    @pl.when(c == pl.num_programs(1) - 1)
    def _fold():
        dmean = sum_ref[...] / count
        var = jnp.maximum(sq_ref[...] / count - dmean * dmean, 0.0)  # biased variance
        mean_ref[0] = ref_ref[...] + dmean
        scale_ref[0] = 0.5 * jax.lax.rsqrt(var + EPS)                 # the / 2.0 folded in


def _normalize(c_ref, mean_ref, scale_ref, y_ref):
    y_ref[...] = ((c_ref[...] - mean_ref[...]) * scale_ref[...]).astype(y_ref.dtype)


def kernel(x, weight):
    n, cin, h, w = x.shape
    cout, _, kh_size, kw_size = weight.shape
    oh, ow = h - kh_size + 1, w - kw_size + 1
    offsets = [kh * w + kw for kh in range(kh_size) for kw in range(kw_size)]
    chunks = -(-(oh * w) // CHUNK)
    n_halo = 1 + -(-max(offsets) // CHUNK)      # this chunk plus enough following ones
    length = (chunks + n_halo - 1) * CHUNK
    xf = jnp.pad(x.reshape(n, cin, h * w), ((0, 0), (0, 0), (0, length - h * w)))
    taps = weight.transpose(2, 3, 0, 1).reshape(kh_size * kw_size, cout, cin)
    p = jnp.arange(chunks * CHUNK)
    mask = ((p < oh * w) & (p % w < ow)).astype(jnp.float32).reshape(1, chunks * CHUNK)
    f32 = jnp.float32

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, d=d: (b, 0, c + d))
               for d in range(n_halo)]
    chunk_spec = pl.BlockSpec((1, cout, CHUNK), lambda b, c: (b, 0, c))
    plane_spec = pl.BlockSpec((1, cout, 1), lambda b, c: (b, 0, 0))
    conv, mean, scale = pl.pallas_call(
        lambda *refs: _conv_stats(offsets, n_halo, float(oh * ow), *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)),
                            pl.BlockSpec((1, CHUNK), lambda b, c: (0, c))],
        out_specs=[chunk_spec, plane_spec, plane_spec],
        out_shape=[jax.ShapeDtypeStruct((n, cout, chunks * CHUNK), f32),
                   jax.ShapeDtypeStruct((n, cout, 1), f32),
                   jax.ShapeDtypeStruct((n, cout, 1), f32)],
        scratch_shapes=[pltpu.VMEM((cout, 1), f32)] * 3,
    )(*([xf] * n_halo), taps, mask)

    yf = pl.pallas_call(
        _normalize,
        grid=(n, chunks),
        in_specs=[chunk_spec, plane_spec, plane_spec],
        out_specs=chunk_spec,
        out_shape=jax.ShapeDtypeStruct((n, cout, chunks * CHUNK), x.dtype),
    )(conv, mean, scale)
    return yf[:, :, :oh * w].reshape(n, cout, oh, w)[:, :, :, :ow]
