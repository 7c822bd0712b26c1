# The starter's rotary embedding with its decisions as knobs (pallas.json "knobs"; an episode's
# `knobs` action prepends one `NAME = value` line per knob).
#   TOKENS  tokens per grid step: "t1" one (the starter's: 4,096 grid steps at the full size, each
#           forming one token's angles in a (1, D) row, one sublane of eight); "t8" eight (512 steps
#           at the full size; 8 divides T at every size set, so the program is the same at each):
#           the eight tokens' angles in one (8, D) array, a full vreg of float32 per D/128, and the
#           rotation of each token's (heads, D) rows with its own cos/sin row
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# task.json draws pos ~ randint[0, 8192) (an 8192-token context). The angles must be as accurate
# as float64 (float32 angles pos * inv_freq are off by up to 5e-4 rad at position 8191), and JAX
# runs without float64 here. So the kernel forms them itself, per token, from an iota, in
# float-float arithmetic (a value as an unevaluated sum hi + lo of two float32s, ~44 significant
# bits: exact products of 12-bit halves and Knuth's exact sums), and only the final cos/sin in float32:
#   inv_freq[i] = exp(-(2i / D) ln 10000)                 float-float exp (Taylor, 2^k scaling)
#   turns[i] = pos[t] * inv_freq[i] / (2 pi)              float-float; its whole turns dropped
#   a = 2 pi * frac(turns) in [-pi, pi]                   cos a = cos(a_hi) - sin(a_hi) a_lo
# Not a numpy table of every position baked in at trace time: a constant array whose values
# change with D could not be checked at the full size (docs/pallas.md). Each loop below runs a
# fixed number of times, whatever the sizes.
_HIGH_BITS = -4096  # 0xFFFFF000: sign, exponent and the top 11 stored significand bits


def _ff(value):
    """A Python float as a float-float constant (hi, lo)."""
    hi = np.float32(value)
    return np.float32(hi), np.float32(value - float(hi))


_LN_BASE = _ff(math.log(10000.0))
_LN2 = _ff(math.log(2.0))
_INV_2PI = _ff(1.0 / (2.0 * math.pi))
_TWO_PI = _ff(2.0 * math.pi)
_EXP_TERMS = 13  # Taylor terms of exp(r), |r| <= ln2 / 2: the next is 0.35^13 / 13! < 1e-15
_INV_FACTORIAL = [_ff(1.0 / math.factorial(n)) for n in range(_EXP_TERMS)]


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):  # |a| >= |b|
    s = a + b
    return s, b - (s - a)


def _split(a):
    # The top 12 significand bits by masking (not Dekker's (2^12 + 1) a trick, which a compiler
    # that contracts a * b - c into one fused multiply-add silently breaks): the halves' products
    # are exact in float32 however they are summed.
    hi = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(a, jnp.int32) & _HIGH_BITS, jnp.float32)
    return hi, a - hi


def _two_prod(a, b):
    # a * b as hi + lo from the halves' products, each exact in float32: no rounded product that a
    # compiler contracting a * b + c into one fused multiply-add could use unrounded in one place
    # and rounded in another (XLA on a CPU does, depending on how it fuses: the interpret mode's
    # kernels differed from jax.jit's by 1e-4 rad with Dekker's form, p = fl(a b) and its error).
    ah, al = _split(a)
    bh, bl = _split(b)
    mid, mid_err = _two_sum(ah * bl, al * bh)
    hi, lo = _fast_two_sum(ah * bh, mid)
    return _fast_two_sum(hi, lo + (mid_err + al * bl))


def _ff_mul(x, y):
    p, e = _two_prod(x[0], y[0])
    return _fast_two_sum(p, e + (x[0] * y[1] + x[1] * y[0]))


def _ff_add(x, y):
    s, e = _two_sum(x[0], y[0])
    return _fast_two_sum(s, e + (x[1] + y[1]))


def _ff_exp(x):
    """exp of a float-float x (|x| < 100): 2^k exp(r), r = x - k ln2, exp(r) by its Taylor series."""
    k = jnp.floor(x[0] / _LN2[0] + 0.5)
    kl = _ff_mul((k, jnp.zeros_like(k)), _LN2)
    r = _ff_add(x, (-kl[0], -kl[1]))
    acc = tuple(jnp.full_like(x[0], c) for c in _INV_FACTORIAL[-1])
    for n in range(_EXP_TERMS - 2, -1, -1):
        acc = _ff_add(_ff_mul(acc, r), tuple(jnp.full_like(x[0], c) for c in _INV_FACTORIAL[n]))
    scale = jax.lax.bitcast_convert_type((k.astype(jnp.int32) + 127) << 23, jnp.float32)  # 2^k exactly
    return acc[0] * scale, acc[1] * scale


def _cos_sin(p, d):
    """cos and sin of p * 10000^(-2i/D) at the D lanes of each row, i = lane mod D/2 (the half-split
    pairs share an angle), to about float32 rounding. p: the positions as float32 (rows, D), each
    row one token's position on every lane."""
    lane = jax.lax.broadcasted_iota(jnp.int32, p.shape, 1)
    two_i = 2.0 * jnp.where(lane >= d // 2, lane - d // 2, lane).astype(jnp.float32)  # exact
    q_hi = two_i / d                                                # 2i / D as float-float:
    p_hi, p_lo = _two_prod(q_hi, jnp.full_like(q_hi, d))            # the remainder 2i - q_hi D
    q_lo = ((two_i - p_hi) - p_lo) / d                              # is exact
    t = _ff_mul((q_hi, q_lo), _LN_BASE)
    freq = _ff_exp((-t[0], -t[1]))
    turns = _ff_mul((p, jnp.zeros_like(p)), _ff_mul(freq, _INV_2PI))  # p is exact: pos < 2^24
    whole = jnp.floor(turns[0] + 0.5)
    frac = _fast_two_sum(turns[0] - whole, turns[1])                 # turns[0] - whole is exact
    a_hi, a_lo = _ff_mul(frac, _TWO_PI)                              # the angle in [-pi, pi]
    c, s = jnp.cos(a_hi), jnp.sin(a_hi)
    return c - s * a_lo, s + c * a_lo


def _rope_token(pos_ref, q_ref, k_ref, qo_ref, ko_ref):
    # One token (grid step t): the cos/sin of pos[t] (scalar-prefetched into SMEM) applied to all
    # its query and key heads. rotate_half(x) = [-x2, x1] is a roll by D/2 (= [x2, x1]) times the
    # sign folded into the sin row ([-s, s]).
    d = q_ref.shape[-1]
    half = d // 2
    p = jnp.full((1, d), pos_ref[pl.program_id(0)].astype(jnp.float32))
    c, s = _cos_sin(p, d)
    lane = jax.lax.broadcasted_iota(jnp.int32, (1, d), 1)
    s = jnp.where(lane < half, -s, s)
    q = q_ref[0].astype(jnp.float32)  # (Hq, D), rotated in float32
    k = k_ref[0].astype(jnp.float32)  # (Hk, D)
    qo_ref[0] = (q * c + pltpu.roll(q, half, 1) * s).astype(qo_ref.dtype)
    ko_ref[0] = (k * c + pltpu.roll(k, half, 1) * s).astype(ko_ref.dtype)


def _rope_tokens(pos_ref, q_ref, k_ref, qo_ref, ko_ref):
    # Eight tokens (grid step t: tokens 8t .. 8t + 7): their positions gathered from
    # SMEM into one (8, D) array (row i: token i's position on every lane), the angles of all eight
    # formed at once, then each token's heads rotated with its own cos/sin row.
    n, d = q_ref.shape[0], q_ref.shape[-1]
    half = d // 2
    row = jax.lax.broadcasted_iota(jnp.int32, (n, d), 0)
    first = pl.program_id(0) * n
    p = jnp.zeros((n, d), jnp.float32)
    for i in range(n):
        p = jnp.where(row == i, pos_ref[first + i].astype(jnp.float32), p)
    c, s = _cos_sin(p, d)
    lane = jax.lax.broadcasted_iota(jnp.int32, (n, d), 1)
    s = jnp.where(lane < half, -s, s)
    for i in range(n):
        ci, si = c[i:i + 1], s[i:i + 1]
        q = q_ref[i].astype(jnp.float32)  # (Hq, D), rotated in float32
        k = k_ref[i].astype(jnp.float32)  # (Hk, D)
        qo_ref[i] = (q * ci + pltpu.roll(q, half, 1) * si).astype(qo_ref.dtype)
        ko_ref[i] = (k * ci + pltpu.roll(k, half, 1) * si).astype(ko_ref.dtype)


def kernel(q, k, pos):
    T, Hq, D = q.shape
    Hk = k.shape[1]
    n = 1 if TOKENS == "t1" else 8
    q_spec = pl.BlockSpec((n, Hq, D), lambda t, p: (t, 0, 0))
    k_spec = pl.BlockSpec((n, Hk, D), lambda t, p: (t, 0, 0))
    return pl.pallas_call(
        _rope_token if n == 1 else _rope_tokens,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,  # pos, in SMEM
            grid=(T // n,),
            in_specs=[q_spec, k_spec],
            out_specs=(q_spec, k_spec)),
        out_shape=(jax.ShapeDtypeStruct((T, Hq, D), q.dtype), jax.ShapeDtypeStruct((T, Hk, D), k.dtype)),
    )(pos.astype(jnp.int32), q, k)
