# The starter's fused matmul + online logsumexp with its decisions as knobs (pallas.json "knobs";
# an episode's `knobs` action prepends one `NAME = value` line per knob). A block is the starter's
# constant rule or a fixed fraction of its dimension (T / 8, T / 4, the whole D): each follows the
# task's sizes in one way at every size set, so the full-size program is proven the checked one and
# its estimate is paid (docs/pallas.md "What is paid is what was checked").
#   TOKENS   token rows per logits tile: "t256" 256 (the starter's), "t8" T / 8, "t4" T / 4 (1024
#            and 2048 at the full T = 8192). W (1 GiB at the full size) is streamed once per token
#            tile, so larger tiles read it fewer times (32 GiB at 256 rows, 4 GiB at T / 4)
#   D_BLOCK  the contraction's step: "d256" 256 deep (the starter's) or "whole" (all of D, 4096 at
#            the full size): no k axis, one dot per logits tile, 16x fewer grid steps, and the
#            token tile's rows of hidden fetched once per token tile instead of once per vocab tile
# The vocab tile stays 384 wide: the largest multiple of 128 dividing every size set's V (1152,
# 1920, 128256), and a fraction of V would be 42752 wide at the full size.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _tile(dim, preferred, quantum):
    # The largest multiple of `quantum` <= preferred that divides dim; the whole dim if none does.
    t = (min(preferred, dim) // quantum) * quantum
    while t >= quantum:
        if dim % t == 0:
            return t
        t -= quantum
    return dim


def _ce_block(h_ref, w_ref, lab_ref, out_ref, acc_ref, m_ref, l_ref, pick_ref):
    # Grid (i: token tiles, j: vocab tiles, k: hidden-dim slices), all sequential.
    # acc: this (i, j) logits tile, accumulated over k. m / l: running max and sum of exp over the
    # vocab tiles seen so far (online logsumexp). pick: the label's logit. out: the (1, 1) total.
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    nj, nk = pl.num_programs(1), pl.num_programs(2)
    bt, bv = acc_ref.shape

    @pl.when((i == 0) & (j == 0) & (k == 0))
    def _():
        out_ref[...] = jnp.zeros_like(out_ref)

    @pl.when((j == 0) & (k == 0))
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        pick_ref[...] = jnp.zeros_like(pick_ref)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == nk - 1)
    def _():
        z = acc_ref[...].astype(h_ref.dtype).astype(jnp.float32)  # the logits in the inputs' dtype
        m_old = m_ref[...]
        m_new = jnp.maximum(m_old, jnp.max(z, axis=1, keepdims=True))
        l_ref[...] = l_ref[...] * jnp.exp(m_old - m_new) + jnp.sum(jnp.exp(z - m_new), axis=1, keepdims=True)
        m_ref[...] = m_new
        col = j * bv + jax.lax.broadcasted_iota(jnp.int32, (bt, bv), 1)
        pick_ref[...] += jnp.sum(jnp.where(col == lab_ref[...], z, 0.0), axis=1, keepdims=True)

    @pl.when((k == nk - 1) & (j == nj - 1))
    def _():
        loss = m_ref[...] + jnp.log(l_ref[...]) - pick_ref[...]
        out_ref[...] += jnp.sum(loss, axis=0, keepdims=True)


def kernel(hidden, W, labels):
    T, D = hidden.shape
    V = W.shape[1]
    # 16 rows: the bfloat16 sublane tile (T / 8 is 32 rows at the smallest size set).
    bt = _tile(T, 256, 16) if TOKENS == "t256" else T // (8 if TOKENS == "t8" else 4)
    bv = _tile(V, 512, 128)
    bd = _tile(D, 256, 128) if D_BLOCK == "d256" else D
    # The starter's blocks (at most 512 KiB) fit the default scoped VMEM; a T / 4 x D block of
    # hidden is 16 MiB at the full size, double-buffered, beside 3 MiB logits tiles.
    big = TOKENS != "t256" or D_BLOCK != "d256"
    params = pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024) if big else None
    total = pl.pallas_call(
        _ce_block,
        grid=(T // bt, V // bv, D // bd),
        in_specs=[pl.BlockSpec((bt, bd), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bd, bv), lambda i, j, k: (k, j)),
                  pl.BlockSpec((bt, 1), lambda i, j, k: (i, 0))],
        out_specs=pl.BlockSpec((1, 1), lambda i, j, k: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.float32),
        scratch_shapes=[pltpu.VMEM((bt, bv), jnp.float32), pltpu.VMEM((bt, 1), jnp.float32),
                        pltpu.VMEM((bt, 1), jnp.float32), pltpu.VMEM((bt, 1), jnp.float32)],
        compiler_params=params,
    )(hidden, W, labels.astype(jnp.int32).reshape(T, 1))
    return (total / T).reshape(1).astype(hidden.dtype)
