import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# Naive direct 3x3 convolution (stride 1, no padding) in NCHW, as 9 shifted matmuls.
# Layout: each image's H x W plane is flattened onto the lane axis, so output position
# p = oh * W + ow reads input positions p + kh * W + kw. The row shifts kh * W are taken outside
# the kernel (layout glue: rows[n, kh] is the image moved up by kh rows, zero below), the column
# shifts kw inside it, so every offset in the program is a whole number of rows or a constant.
# Outputs are computed at all H x W positions (the rows oh >= OH and columns ow >= OW are junk
# and sliced off afterwards) in chunks of CHUNK lanes: grid (N, H*W / CHUNK). A chunk's column
# shifts reach at most KW - 1 lanes past its end, so each step also gets the following chunk of
# the rows (the halo; the last chunk takes itself again: the lanes it would need past the end
# of the plane feed junk columns only):
#     acc[Cout, CHUNK] += weight[:, :, kh, kw] [Cout, Cin] @ rows[kh][:, kw : kw + CHUNK]
# Epilogue: y = relu(acc + conv_bias) + bias. Blocks are [3, Cin, 512] / [Cout, 512] float32
# (384 KiB / 256 KiB at Cin=64, Cout=128), well within VMEM. H * W must be a multiple of CHUNK.
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


def _conv_relu_bias(kw_size, x_ref, halo_ref, w_ref, cb_ref, b_ref, y_ref):
    acc = _conv_chunk(x_ref, halo_ref, w_ref, kw_size)
    y_ref[0] = (jnp.maximum(acc + cb_ref[...], 0.0) + b_ref[...]).astype(y_ref.dtype)


def kernel(x, weight, conv_bias, bias):
    n, cin, h, w = x.shape
    cout, _, kh_size, kw_size = weight.shape
    oh, ow = h - kh_size + 1, w - kw_size + 1
    chunks = h * w // CHUNK
    rows = _shifted_rows(x, kh_size)
    taps = weight.transpose(2, 3, 0, 1).reshape(kh_size * kw_size, cout, cin)

    col = pl.BlockSpec((cout, 1), lambda b, c: (0, 0))
    yf = pl.pallas_call(
        lambda *refs: _conv_relu_bias(kw_size, *refs),
        grid=(n, chunks),
        in_specs=_row_specs(kh_size, cin, chunks) + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)), col, col],
        out_specs=pl.BlockSpec((1, cout, CHUNK), lambda b, c: (b, 0, c)),
        out_shape=jax.ShapeDtypeStruct((n, cout, h * w), x.dtype),
    )(rows, rows, taps, conv_bias.reshape(cout, 1), bias.reshape(cout, 1))
    return yf.reshape(n, cout, h, w)[:, :, :oh, :ow]
