import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Naive direct 3x3 convolution (stride 1, no padding) in NCHW, as 9 shifted matmuls, with the
# GELU and the global average pool fused in.
# Layout: each image's H x W plane is flattened onto the lane axis, so output position
# p = oh * W + ow reads input positions p + kh * W + kw. Output positions are computed for all
# W columns of the first OH rows in chunks of CHUNK lanes: grid (N, chunks), chunks innermost.
# A chunk needs the input from p to p + 2W + 2, so each step also gets the following chunk(s)
# of x as extra blocks of the same array (the halo); the kernel joins them and, per tap, takes
# the lane slice at offset kh * W + kw:
#     acc[Cout, CHUNK] += weight[:, :, kh, kw] [Cout, Cin] @ x_slice [Cin, CHUNK]
# Then g = gelu(acc + conv_bias); a 0/1 mask (built outside) drops the junk columns ow >= OW
# and the padding rows; the per-channel sums accumulate over the chunks of one image and the
# last chunk writes sum / (OH * OW). Blocks are [Cin, 512] / [Cout, 512] float32.
CHUNK = 512
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


def _conv_gelu_pool(offsets, n_halo, count, *refs):
    x_refs = refs[:n_halo]
    w_ref, cb_ref, mask_ref, y_ref, sum_ref = refs[n_halo:]
    c = pl.program_id(1)

    @pl.when(c == 0)
    def _init():
        sum_ref[...] = jnp.zeros_like(sum_ref)

    v = _conv_chunk(x_refs, w_ref, offsets) + cb_ref[...]
    g = 0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))
    sum_ref[...] += jnp.sum(g * mask_ref[...], axis=1, keepdims=True)

    @pl.when(c == pl.num_programs(1) - 1)
    def _store():
        y_ref[0] = (sum_ref[...] / count).astype(y_ref.dtype)


def kernel(x, weight, conv_bias):
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

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, d=d: (b, 0, c + d))
               for d in range(n_halo)]
    pooled = pl.pallas_call(
        lambda *refs: _conv_gelu_pool(offsets, n_halo, float(oh * ow), *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)),
                            pl.BlockSpec((cout, 1), lambda b, c: (0, 0)),
                            pl.BlockSpec((1, CHUNK), lambda b, c: (0, c))],
        out_specs=pl.BlockSpec((1, cout, 1), lambda b, c: (b, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((n, cout, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((cout, 1), jnp.float32)],
    )(*([xf] * n_halo), taps, conv_bias.reshape(cout, 1), mask)
    return pooled.reshape(n, cout)
