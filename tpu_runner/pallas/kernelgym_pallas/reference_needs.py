"""Which input positions the reference's answer in one output block needs, by its gradient.

prefix_reads.py binds a kernel whose output blocks read their whole prefix where checked to read
it at the full size. That is the causal mask's shape; but a sliding window the checked sizes hold
whole at the kernels' block granularity reads its whole prefix there too (StreamingLLM's sink and
128-token window at S = 384: query block 2 reads key blocks 0-2, all of them), and at the full
size reads 3 of 32 blocks, honestly. What tells them apart is the reference: where checked, does
the answer in that output block need every position before it? A masked score contributes
exactly nothing, so its key's gradient is exactly zero; a visible one's is not (inputs drawn at
random, arithmetic in float32). One vector-Jacobian product of the reference at a checked size
set answers it, asked only when a finding would leave the estimate untrusted. A zero gradient is
not proof by itself (a maximum's gradient is zero but at its argument): the positions it calls
unneeded are then moved far (+1000 each, all at once) and the block's answer must not move at all.
"""
from __future__ import annotations

import numpy as np


def needs_all(reference, inputs: list, i: int, d: int, output: int, starts: list, sizes: list,
              a: int, b: int, seed: int = 0) -> bool:
    """Whether the reference's output `output` in the block at `starts` (sizes `sizes`) needs every
    position [a, b) of dimension d of input i: its gradient there, for a random weighting of the
    block, is nonzero at each of them (summed over the input's other dimensions). Inputs that are
    not floating point are not differentiated: True (the reads alone decide)."""
    import jax
    import jax.numpy as jnp
    x = [jnp.asarray(v) for v in inputs]
    if not jnp.issubdtype(x[i].dtype, jnp.floating):
        return True

    def answer(xi):
        args = list(x)
        args[i] = xi
        out = reference(*args)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return jnp.asarray(out[output]).astype(jnp.float32)

    primal = x[i].astype(jnp.float32)
    out, pullback = jax.vjp(answer, primal)
    weights = np.zeros(out.shape, np.float32)
    block = tuple(slice(int(s), int(s) + int(n)) for s, n in zip(starts, sizes))
    rng = np.random.default_rng(seed)
    weights[block] = rng.standard_normal(weights[block].shape).astype(np.float32)
    (gradient,) = pullback(jnp.asarray(weights))
    other = tuple(k for k in range(gradient.ndim) if k != d)
    reached = np.asarray(jnp.any(gradient != 0, axis=other))
    if reached[a:b].all():
        return True
    # the positions the gradient calls unneeded, moved far: the block's answer must not move
    moved = np.zeros(primal.shape[d], np.float32)
    moved[a:b][~reached[a:b]] = 1000.0
    shape = [1] * primal.ndim
    shape[d] = primal.shape[d]
    again = answer(primal + jnp.asarray(moved.reshape(shape)))
    return bool(np.any(np.asarray(again)[block] != np.asarray(out)[block]))
