import jax
import jax.numpy as jnp


def reference(x, Wr, Wg, Wu, Wd):
    # Top-2 sparse MoE (Mixtral style), float32. Router: logits = x @ Wr; the two largest per
    # token, equal logits -> lower expert index first (lax.top_k's documented tie rule, the same as
    # the torch reference's stable descending sort); gates = softmax over the two logits.
    # Dtypes as 10p_Sparse_MoE: bfloat16 inputs and output; every dot sums exact products in float32
    # and rounds to bfloat16 (the router's logits, whose ties after rounding go to the lower expert
    # index; each expert's g, u and output); softmax, silu and the gating product are bfloat16
    # operations; the gated sum over the experts is float32, rounded once.
    dtype = x.dtype
    f32 = jnp.float32
    dot = lambda a, b: jnp.dot(a, b, preferred_element_type=f32).astype(dtype)
    T, E = x.shape[0], Wr.shape[1]
    logits = dot(x, Wr).astype(f32)
    top_vals, top_idx = jax.lax.top_k(logits, 2)
    gates = jax.nn.softmax(top_vals, axis=1).astype(dtype).astype(f32)
    weights = jnp.zeros((T, E), f32).at[jnp.arange(T)[:, None], top_idx].set(gates)  # [T, E]

    # Every expert on every token, weighted by its gate (0 for unselected experts): the same
    # result as the torch reference's per-expert gather / index_add (only exact zeros are added),
    # and the original JAXBench formulation. A scan over the experts, in index order, compiles one
    # expert body: the unrolled loop takes ~50 s to compile for the TPU at the full sizes (every
    # evaluation compiles the reference for its cost estimate) against ~5 s. XLA's cost analysis
    # counts the body once, so that estimate covers one expert of the eight.
    def expert(out, params):
        wg, wu, wd, w = params
        h = jax.nn.silu(dot(x, wg)) * dot(x, wu)
        return out + w[:, None] * dot(h, wd).astype(f32), None

    out, _ = jax.lax.scan(expert, jnp.zeros(x.shape, f32), (Wg, Wu, Wd, weights.T))
    return out.astype(dtype)
