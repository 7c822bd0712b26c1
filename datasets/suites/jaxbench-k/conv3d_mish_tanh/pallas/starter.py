import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# Naive direct 3x3x3 convolution (stride 1, no padding) in NCDHW as 27 shifted matmuls, with
# bias, Mish and Tanh fused in.
# Layout: each volume's D x H x W positions are flattened onto the lane axis, so output
# position p = od*H*W + oh*W + ow reads input positions p + kd*H*W + kh*W + kw. Outputs are
# computed for all H x W positions of the first OD planes (positions with oh >= OH or
# ow >= OW are junk and sliced off afterwards) in chunks of CHUNK lanes: grid (N, chunks).
# A chunk needs the input up to 2*H*W + 2*W + 2 lanes past its end, so each step also gets
# the following chunk(s) of x as extra blocks of the same array (the halo); the kernel joins
# them and, per tap, takes the lane slice at the tap's offset:
#     acc[Cout, CHUNK] += weight[:, :, kd, kh, kw] [Cout, Cin] @ x_slice [Cin, CHUNK]
# Blocks are [Cin, 512] / [Cout, 512] float32 (128 KiB at Cout=64), well within VMEM.
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


def _conv_mish_tanh(offsets, n_halo, *refs):
    x_refs = refs[:n_halo]
    w_ref, b_ref, y_ref = refs[n_halo:]
    v = _conv_chunk(x_refs, w_ref, offsets) + b_ref[...]
    m = v * jnp.tanh(jax.nn.softplus(v))
    y_ref[0] = jnp.tanh(m).astype(y_ref.dtype)


def kernel(x, weight, bias):
    n, cin, d, h, w = x.shape
    cout, _, kd_size, kh_size, kw_size = weight.shape
    od, oh, ow = d - kd_size + 1, h - kh_size + 1, w - kw_size + 1
    offsets = [kd * h * w + kh * w + kw
               for kd in range(kd_size) for kh in range(kh_size) for kw in range(kw_size)]
    volume = d * h * w
    chunks = -(-(od * h * w) // CHUNK)
    n_halo = 1 + -(-max(offsets) // CHUNK)      # this chunk plus enough following ones
    length = (chunks + n_halo - 1) * CHUNK
    xf = jnp.pad(x.reshape(n, cin, volume), ((0, 0), (0, 0), (0, length - volume)))
    taps = weight.transpose(2, 3, 4, 0, 1).reshape(kd_size * kh_size * kw_size, cout, cin)

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, e=e: (b, 0, c + e))
               for e in range(n_halo)]
    yf = pl.pallas_call(
        lambda *refs: _conv_mish_tanh(offsets, n_halo, *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)),
                            pl.BlockSpec((cout, 1), lambda b, c: (0, 0))],
        out_specs=pl.BlockSpec((1, cout, CHUNK), lambda b, c: (b, 0, c)),
        out_shape=jax.ShapeDtypeStruct((n, cout, chunks * CHUNK), x.dtype),
    )(*([xf] * n_halo), taps, bias.reshape(cout, 1))
    return yf[:, :, :od * h * w].reshape(n, cout, od, h, w)[:, :, :, :oh, :ow]
