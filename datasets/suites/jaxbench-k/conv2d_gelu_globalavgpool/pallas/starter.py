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


def _shifted_rows(x, kh_size):
    """rows[n, kh, ci, h * W + w] = x[n, ci, h + kh, w] (zero past the last row)."""
    n, cin, h, w = x.shape
    xp = jnp.pad(x, ((0, 0), (0, 0), (0, kh_size - 1), (0, 0)))
    rows = jnp.stack([xp[:, :, kh:kh + h, :] for kh in range(kh_size)], axis=1)
    return rows.reshape(n, kh_size, cin, h * w)


def _row_specs(kh_size, cin, chunks):
    """This chunk of every row shift, and the following one (the halo)."""
    block = (1, kh_size, cin, CHUNK)
    return [pl.BlockSpec(block, lambda b, c: (b, 0, 0, c)),
            pl.BlockSpec(block, lambda b, c: (b, 0, 0, jnp.minimum(c + 1, chunks - 1)))]


def _valid_mask(h, w, oh, ow):
    """1.0 at the flattened positions p = oh * W + ow of real outputs, 0.0 at the junk ones."""
    p = jnp.arange(h * w)
    return ((p // w < oh) & (p % w < ow)).astype(jnp.float32).reshape(1, h * w)


def _conv_chunk(x_ref, halo_ref, w_ref, kw_size):
    """acc[Cout, CHUNK] = sum over taps (kh, kw) of w[kh, kw] @ rows[kh][:, kw : kw + CHUNK]."""
    acc = None
    for kh in range(x_ref.shape[1]):
        xs = jnp.concatenate([x_ref[0, kh], halo_ref[0, kh]], axis=1)  # [Cin, 2 * CHUNK]
        for kw in range(kw_size):
            part = jnp.dot(w_ref[kh * kw_size + kw], xs[:, kw:kw + CHUNK],
                           preferred_element_type=jnp.float32, precision=HI)
            acc = part if acc is None else acc + part
    return acc


def _conv_gelu_pool(kw_size, x_ref, halo_ref, w_ref, cb_ref, mask_ref, count_ref, y_ref, sum_ref):
    c = pl.program_id(1)

    @pl.when(c == 0)
    def _init():
        sum_ref[...] = jnp.zeros_like(sum_ref)

    v = _conv_chunk(x_ref, halo_ref, w_ref, kw_size) + cb_ref[...]
    g = 0.5 * v * (1.0 + jax.lax.erf(v * (1.0 / math.sqrt(2.0))))
    sum_ref[...] += jnp.sum(g * mask_ref[...], axis=1, keepdims=True)

    @pl.when(c == pl.num_programs(1) - 1)
    def _store():
        y_ref[0] = (sum_ref[...] / count_ref[...]).astype(y_ref.dtype)


def kernel(x, weight, conv_bias):
    n, cin, h, w = x.shape
    cout, _, kh_size, kw_size = weight.shape
    oh, ow = h - kh_size + 1, w - kw_size + 1
    chunks = h * w // CHUNK
    rows = _shifted_rows(x, kh_size)
    taps = weight.transpose(2, 3, 0, 1).reshape(kh_size * kw_size, cout, cin)
    mask = _valid_mask(h, w, oh, ow)
    count = jnp.sum(mask).reshape(1, 1)  # OH * OW, counted in the program

    pooled = pl.pallas_call(
        lambda *refs: _conv_gelu_pool(kw_size, *refs),
        grid=(n, chunks),
        in_specs=_row_specs(kh_size, cin, chunks) + [
            pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)),
            pl.BlockSpec((cout, 1), lambda b, c: (0, 0)),
            pl.BlockSpec((1, CHUNK), lambda b, c: (0, c)), pl.BlockSpec((1, 1), lambda b, c: (0, 0))],
        out_specs=pl.BlockSpec((1, cout, 1), lambda b, c: (b, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((n, cout, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((cout, 1), jnp.float32)],
    )(rows, rows, taps, conv_bias.reshape(cout, 1), mask, count)
    return pooled.reshape(n, cout)
