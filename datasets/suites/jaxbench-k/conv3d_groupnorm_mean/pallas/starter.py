import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# One naive pass: direct 3x3x3 convolution (stride 1, no padding) in NCDHW as 27 shifted
# matmuls, accumulating each channel's sum and sum of squares over the volume; the last chunk
# of a volume turns them into the output. The GroupNorm'd values are never materialized:
#   out[n] = mean_c( gn_weight[c] * (mu[c] - mu_g(c)) / sqrt(var_g(c) + eps) + gn_bias[c] )
# with mu[c] the channel mean and mu_g, var_g the mean and biased variance of c's group (the
# mean of a per-channel affine of h over positions is that affine of the channel mean).
# Layout: each volume's D x H x W positions are flattened onto the lane axis, so output
# position p = od*H*W + oh*W + ow reads input positions p + kd*H*W + kh*W + kw. The plane and
# row shifts kd*H*W + kh*W are taken outside the kernel (layout glue: rows[n, kd*KH + kh] is
# the volume moved by kd planes and kh rows, zero past the end), the column shifts kw inside
# it, so every offset in the program is a whole number of planes or rows, or a constant.
# Outputs are computed at all D x H x W positions in chunks of CHUNK lanes: grid
# (N, D*H*W / CHUNK), chunks innermost. A chunk's column shifts reach at most KW - 1 lanes past
# its end, so each step also gets the following chunk of the rows (the halo; the last chunk
# takes itself again: the lanes past the end of the volume feed junk positions only):
#     acc[Cout, CHUNK] += weight[:, :, kd, kh, kw] [Cout, Cin] @ rows[kd, kh][:, kw : kw + CHUNK]
# A 0/1 mask (built in the program from an iota) keeps the junk positions (od >= OD, oh >= OH,
# ow >= OW) out of the sums, and its sum is the count of real positions; a 0/1 same-group
# matrix sums channel statistics over each group. The sums are taken of h - ref, with ref the
# group's mean over the first chunk, so that E[d^2] - E[d]^2 in float32 does not cancel away
# the variance when a group's mean is large next to its spread (and mu - mu_g is a difference
# of two small shifted means). D * H * W must be a multiple of CHUNK.
# Blocks are [9, Cin, 512] / [Cout, 512] float32, tiny next to VMEM.
CHUNK = 512
GROUPS = 8
EPS = 1e-5
HI = jax.lax.Precision.HIGHEST


def _shifted_rows(x, kd_size, kh_size):
    """rows[n, kd * KH + kh, ci, (d * H + h) * W + w] = x[n, ci, d + kd, h + kh, w] (zero past the end)."""
    n, cin, d, h, w = x.shape
    xp = jnp.pad(x, ((0, 0), (0, 0), (0, kd_size - 1), (0, kh_size - 1), (0, 0)))
    # Planes first, then rows: the same copy in one stack of nine 5D slices leaves XLA's TPU cost
    # model with a negative time for it (an untrusted estimate).
    planes = jnp.stack([xp[:, :, kd:kd + d] for kd in range(kd_size)], axis=1)         # [N, KD, Cin, D, H+2, W]
    rows = jnp.stack([planes[:, :, :, :, kh:kh + h] for kh in range(kh_size)], axis=2)  # [N, KD, KH, Cin, D, H, W]
    return rows.reshape(n, kd_size * kh_size, cin, d * h * w)


def _row_specs(shifts, cin, chunks):
    """This chunk of every plane-and-row shift, and the following one (the halo)."""
    block = (1, shifts, cin, CHUNK)
    return [pl.BlockSpec(block, lambda b, c: (b, 0, 0, c)),
            pl.BlockSpec(block, lambda b, c: (b, 0, 0, jnp.minimum(c + 1, chunks - 1)))]


def _conv_chunk(x_ref, halo_ref, w_ref, kw_size):
    """acc[Cout, CHUNK] = sum over taps of w[kd, kh, kw] @ rows[kd, kh][:, kw : kw + CHUNK]."""
    acc = None
    for s in range(x_ref.shape[1]):
        xs = jnp.concatenate([x_ref[0, s], halo_ref[0, s]], axis=1)  # [Cin, 2 * CHUNK]
        for kw in range(kw_size):
            part = jnp.dot(w_ref[s * kw_size + kw], xs[:, kw:kw + CHUNK],
                           preferred_element_type=jnp.float32, precision=HI)
            acc = part if acc is None else acc + part
    return acc


def _conv_gn_mean(kw_size, group_size, x_ref, halo_ref, w_ref, b_ref, gw_ref, gb_ref, same_ref, mask_ref,
                  count_ref, out_ref, ref_ref, sum_ref, sq_ref):
    c = pl.program_id(1)
    same = same_ref[...]  # [Cout, Cout], 1 where two channels share a group
    group_sum = lambda s: jnp.dot(same, s, preferred_element_type=jnp.float32, precision=HI)

    v = _conv_chunk(x_ref, halo_ref, w_ref, kw_size) + b_ref[...]
    mask = mask_ref[...]

    @pl.when(c == 0)
    def _init():
        chunk_mean = jnp.sum(v * mask, axis=1, keepdims=True) / jnp.sum(mask)
        ref_ref[...] = group_sum(chunk_mean) / group_size
        sum_ref[...] = jnp.zeros_like(sum_ref)
        sq_ref[...] = jnp.zeros_like(sq_ref)

    dev = (v - ref_ref[...]) * mask
    sum_ref[...] += jnp.sum(dev, axis=1, keepdims=True)
    sq_ref[...] += jnp.sum(dev * dev, axis=1, keepdims=True)

    @pl.when(c == pl.num_programs(1) - 1)
    def _finish():
        count = count_ref[...]
        s = sum_ref[...]
        dmu = s / count                                        # channel mean - ref
        dmu_g = group_sum(s) / (count * group_size)            # group mean - ref
        var_g = jnp.maximum(group_sum(sq_ref[...]) / (count * group_size) - dmu_g * dmu_g, 0.0)
        per_channel = gw_ref[...] * (dmu - dmu_g) * jax.lax.rsqrt(var_g + EPS) + gb_ref[...]
        out_ref[0] = jnp.mean(per_channel, axis=0, keepdims=True).astype(out_ref.dtype)


def kernel(x, weight, bias, gn_weight, gn_bias):
    n, cin, d, h, w = x.shape
    cout, _, kd_size, kh_size, kw_size = weight.shape
    od, oh, ow = d - kd_size + 1, h - kh_size + 1, w - kw_size + 1
    group_size = cout // GROUPS
    chunks = d * h * w // CHUNK
    rows = _shifted_rows(x, kd_size, kh_size)
    taps = weight.transpose(2, 3, 4, 0, 1).reshape(kd_size * kh_size * kw_size, cout, cin)
    p = jnp.arange(d * h * w)
    mask = (p // (h * w) < od) & ((p // w) % h < oh) & (p % w < ow)
    mask = mask.astype(jnp.float32).reshape(1, d * h * w)
    count = jnp.sum(mask).reshape(1, 1)  # OD * OH * OW, counted in the program
    ch = jnp.arange(cout) // group_size
    same = (ch[:, None] == ch[None, :]).astype(jnp.float32)
    f32 = jnp.float32

    col = pl.BlockSpec((cout, 1), lambda b, c: (0, 0))
    out = pl.pallas_call(
        lambda *refs: _conv_gn_mean(kw_size, float(group_size), *refs),
        grid=(n, chunks),
        in_specs=_row_specs(kd_size * kh_size, cin, chunks) + [
            pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)), col, col, col,
            pl.BlockSpec((cout, cout), lambda b, c: (0, 0)),
            pl.BlockSpec((1, CHUNK), lambda b, c: (0, c)), pl.BlockSpec((1, 1), lambda b, c: (0, 0))],
        out_specs=pl.BlockSpec((1, 1, 1), lambda b, c: (b, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((n, 1, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((cout, 1), f32)] * 3,
    )(rows, rows, taps, bias.reshape(cout, 1), gn_weight.reshape(cout, 1), gn_bias.reshape(cout, 1), same, mask, count)
    return out.reshape(n)
