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
# position p = od*H*W + oh*W + ow reads input positions p + kd*H*W + kh*W + kw. Outputs are
# computed for all H x W positions of the first OD planes in chunks of CHUNK lanes: grid
# (N, chunks), chunks innermost. A chunk needs the input up to 2*H*W + 2*W + 2 lanes past its
# end, so each step also gets the following chunk(s) of x as extra blocks of the same array
# (the halo); the kernel joins them and, per tap, takes the lane slice at the tap's offset:
#     acc[Cout, CHUNK] += weight[:, :, kd, kh, kw] [Cout, Cin] @ x_slice [Cin, CHUNK]
# A 0/1 mask (built outside) keeps the junk positions (oh >= OH, ow >= OW, padding) out of the
# sums; a 0/1 same-group matrix (built outside) sums channel statistics over each group. The
# sums are taken of h - ref, with ref the group's mean over the first chunk, so that
# E[d^2] - E[d]^2 in float32 does not cancel away the variance when a group's mean is large
# next to its spread (and mu - mu_g is a difference of two small shifted means).
# Blocks are [Cin, 512] / [Cout, 512] float32, tiny next to VMEM.
CHUNK = 512
GROUPS = 8
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


def _conv_gn_mean(offsets, n_halo, count, group_size, *refs):
    x_refs = refs[:n_halo]
    (w_ref, b_ref, gw_ref, gb_ref, same_ref, mask_ref,
     out_ref, ref_ref, sum_ref, sq_ref) = refs[n_halo:]
    c = pl.program_id(1)
    same = same_ref[...]  # [Cout, Cout], 1 where two channels share a group
    group_sum = lambda s: jnp.dot(same, s, preferred_element_type=jnp.float32, precision=HI)

    v = _conv_chunk(x_refs, w_ref, offsets) + b_ref[...]
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
    offsets = [kd * h * w + kh * w + kw
               for kd in range(kd_size) for kh in range(kh_size) for kw in range(kw_size)]
    volume = d * h * w
    chunks = -(-(od * h * w) // CHUNK)
    n_halo = 1 + -(-max(offsets) // CHUNK)      # this chunk plus enough following ones
    length = (chunks + n_halo - 1) * CHUNK
    xf = jnp.pad(x.reshape(n, cin, volume), ((0, 0), (0, 0), (0, length - volume)))
    taps = weight.transpose(2, 3, 4, 0, 1).reshape(kd_size * kh_size * kw_size, cout, cin)
    p = jnp.arange(chunks * CHUNK)
    mask = ((p < od * h * w) & ((p // w) % h < oh) & (p % w < ow))
    mask = mask.astype(jnp.float32).reshape(1, chunks * CHUNK)
    ch = jnp.arange(cout) // group_size
    same = (ch[:, None] == ch[None, :]).astype(jnp.float32)
    f32 = jnp.float32

    x_specs = [pl.BlockSpec((1, cin, CHUNK), lambda b, c, e=e: (b, 0, c + e))
               for e in range(n_halo)]
    col = pl.BlockSpec((cout, 1), lambda b, c: (0, 0))
    out = pl.pallas_call(
        lambda *refs: _conv_gn_mean(offsets, n_halo, float(od * oh * ow), float(group_size), *refs),
        grid=(n, chunks),
        in_specs=x_specs + [pl.BlockSpec(taps.shape, lambda b, c: (0, 0, 0)), col, col, col,
                            pl.BlockSpec((cout, cout), lambda b, c: (0, 0)),
                            pl.BlockSpec((1, CHUNK), lambda b, c: (0, c))],
        out_specs=pl.BlockSpec((1, 1, 1), lambda b, c: (b, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((n, 1, 1), x.dtype),
        scratch_shapes=[pltpu.VMEM((cout, 1), f32)] * 3,
    )(*([xf] * n_halo), taps, bias.reshape(cout, 1), gn_weight.reshape(cout, 1),
      gn_bias.reshape(cout, 1), same, mask)
    return out.reshape(n)
