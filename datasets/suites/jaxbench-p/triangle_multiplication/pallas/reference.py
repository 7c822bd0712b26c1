import jax
import jax.numpy as jnp

_EXACT = jax.lax.Precision.HIGHEST


def _layer_norm(x, w, b, eps=1e-5):
    # torch.layer_norm over the last dim: biased variance, eps inside the square root, affine
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * w + b


def reference(z, ln_in_w, ln_in_b, W_ab, b_ab, ln_out_w, ln_out_b, Wo, bo, Wg, bg):
    # AlphaFold2 triangle multiplicative update, outgoing edges, with 17p_Triangle_Multiplication's
    # dtypes: bfloat16 inputs and output; LayerNorms, projections and gates in float32; the gated
    # a and b (the operands of the N^3 contraction) rounded to bfloat16; t summed in float32.
    dtype = z.dtype
    f32 = lambda x: x.astype(jnp.float32)
    z, ln_in_w, ln_in_b, W_ab, b_ab, ln_out_w, ln_out_b, Wo, bo, Wg, bg = map(
        f32, (z, ln_in_w, ln_in_b, W_ab, b_ab, ln_out_w, ln_out_b, Wo, bo, Wg, bg))
    mm = lambda x, w: jnp.matmul(x, w, precision=_EXACT)
    zl = _layer_norm(z, ln_in_w, ln_in_b)
    # W_ab[p]: 0 a, 1 a gate, 2 b, 3 b gate
    a = jax.nn.sigmoid(mm(zl, W_ab[1]) + b_ab[1]) * (mm(zl, W_ab[0]) + b_ab[0])
    b = jax.nn.sigmoid(mm(zl, W_ab[3]) + b_ab[3]) * (mm(zl, W_ab[2]) + b_ab[2])
    a, b = (f32(x.astype(dtype)) for x in (a, b))
    t = jnp.einsum("ikc,jkc->ijc", a, b, precision=_EXACT)   # t[i, j, c] = sum_k a[i, k, c] * b[j, k, c]
    tl = _layer_norm(t, ln_out_w, ln_out_b)
    g = jax.nn.sigmoid(mm(zl, Wg) + bg)
    return (g * (mm(tl, Wo) + bo)).astype(dtype)
