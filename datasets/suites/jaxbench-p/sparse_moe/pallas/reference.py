import jax
import jax.numpy as jnp


def reference(x, Wr, Wg, Wu, Wd):
    # Top-2 sparse MoE (Mixtral style), float32. Router: logits = x @ Wr; the two largest per
    # token, equal logits -> lower expert index first (lax.top_k's documented tie rule, the same as
    # the torch reference's stable descending sort); gates = softmax over the two logits.
    T, E = x.shape[0], Wr.shape[1]
    logits = jnp.matmul(x, Wr)
    top_vals, top_idx = jax.lax.top_k(logits, 2)
    gates = jax.nn.softmax(top_vals, axis=1)
    weights = jnp.zeros((T, E), x.dtype).at[jnp.arange(T)[:, None], top_idx].set(gates)  # [T, E]

    # Every expert on every token, weighted by its gate (0 for unselected experts): the same
    # result as the torch reference's per-expert gather / index_add (only exact zeros are added),
    # and the original JAXBench formulation. A scan over the experts, in index order, compiles one
    # expert body: the unrolled loop takes ~50 s to compile for the TPU at the full sizes (every
    # evaluation compiles the reference for its cost estimate) against ~5 s. XLA's cost analysis
    # counts the body once, so that estimate covers one expert of the eight.
    def expert(out, params):
        wg, wu, wd, w = params
        h = jax.nn.silu(jnp.matmul(x, wg)) * jnp.matmul(x, wu)
        return out + w[:, None] * jnp.matmul(h, wd), None

    out, _ = jax.lax.scan(expert, jnp.zeros_like(x), (Wg, Wu, Wd, weights.T))
    return out
