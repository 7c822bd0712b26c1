import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# Naive direct 3x3 convolution (stride 1, no padding) in NCHW, as 9 shifted matmuls.
# Layout: each image's H x W plane is flattened onto the lane axis, so output position
# p = oh * W + ow reads input positions p + kh * W + kw. Output positions are computed for all
# W columns of the first OH rows (the columns ow >= OW are junk and sliced off afterwards) in
# chunks of CHUNK lanes: grid (N, chunks). A chunk needs the input from p to p + 2W + 2, so
# each step also gets the following chunk(s) of x as extra blocks of the same array (the halo);
# the kernel joins them and, per tap, takes the lane slice at offset kh * W + kw:
#     acc[Cout, CHUNK] += weight[:, :, kh, kw] [Cout, Cin] @ x_slice [Cin, CHUNK]
# Epilogue: y = relu(acc + conv_bias) + bias. Blocks are [Cin, 512] / [Cout, 512] float32
# (256 KiB at Cout=128), well within VMEM.
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


def _conv_relu_bias(offsets, n_halo, *refs):
    x_refs = refs[:n_halo]
    w_ref, cb_ref, b_ref, y_ref = refs[n_halo:]
    acc = _conv_chunk(x_refs, w_ref, offsets)
    y_ref[0] = (jnp.maximum(acc + cb_ref[...], 0.0) + b_ref[...]).astype(y_ref.dtype)


def kernel(x, weight, conv_bias, bias):
    n, cin, h, w = x.shape
    cout, _, kh_size, kw_size = weight.shape
    oh, ow = h - kh_size + 1, w - kw_size + 1
    offsets = [kh * w + kw for kh in range(kh_size) for kw in range(kw_size)]
    chunks = -(-(oh * w) // CHUNK)
    n_halo = 1 + -(-max(offsets) // CHUNK)      # this chunk plus enough following ones
    length = (chunks + n_halo - 1) * CHUNK
    xf = jnp.pad(x.reshape(n, cin, h * w), ((0, 0), (0, 0), (0, length - h * w)))
    taps = weight.transpose(2, 3, 0, 1).reshape(kh_size * kw_size, cout, cin)

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, d=d: (b, 0, c + d))
               for d in range(n_halo)]
    col = pl.BlockSpec((cout, 1), lambda b, c: (0, 0))
    yf = pl.pallas_call(
        lambda *refs: _conv_relu_bias(offsets, n_halo, *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)), col, col],
        out_specs=pl.BlockSpec((1, cout, CHUNK), lambda b, c: (b, 0, c)),
        out_shape=jax.ShapeDtypeStruct((n, cout, chunks * CHUNK), x.dtype),
    )(*([xf] * n_halo), taps, conv_bias.reshape(cout, 1), bias.reshape(cout, 1))
    return yf[:, :, :oh * w].reshape(n, cout, oh, w)[:, :, :, :ow]
