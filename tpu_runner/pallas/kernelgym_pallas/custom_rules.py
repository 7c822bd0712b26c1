"""Custom differentiation rules taken out of a traced program before it crosses to the judge.

A kernel written for training wraps its forward pass in `jax.custom_vjp` (jax's own
`flash_attention` does). The traced program then holds a `custom_vjp_call` whose parameters are
the forward and backward rules as Python functions, with the arguments the rules close over
(jax's `BlockSizes`, wrapped in `jax._src.util.Unhashable`): objects the judge's reader rightly
refuses to rebuild, which refused the honest kernel (red team round 14). The judge never
differentiates, so the call is replaced by the forward program it already holds (`call_jaxpr`),
inside `jit` too. Done in the tracer (the candidate's process): whatever it hands over is judged
in full, so a tracer that skipped this would only have its program refused as before.
"""
from __future__ import annotations

_CUSTOM_CALLS = {"custom_vjp_call"}
_CALLS_WITH_A_BODY = {"jit", "pjit"}


def _holds_custom_call(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CUSTOM_CALLS:
            return True
        if eqn.primitive.name in _CALLS_WITH_A_BODY and _holds_custom_call(eqn.params["jaxpr"].jaxpr):
            return True
    return False


def _evaluate(jaxpr, consts, args):
    """jax.core.eval_jaxpr with custom calls replaced by their forward program, under a trace."""
    from jax._src import core
    env = {}

    def read(atom):
        return atom.val if isinstance(atom, core.Literal) else env[atom]

    for var, value in zip(jaxpr.constvars, consts):
        env[var] = value
    for var, value in zip(jaxpr.invars, args):
        env[var] = value
    for eqn in jaxpr.eqns:
        values = [read(atom) for atom in eqn.invars]
        name = eqn.primitive.name
        if name in _CUSTOM_CALLS:
            body = eqn.params["call_jaxpr"]
            outs = _evaluate(body.jaxpr, body.consts, values)
        elif name in _CALLS_WITH_A_BODY and _holds_custom_call(eqn.params["jaxpr"].jaxpr):
            outs = eqn.primitive.bind(*values, **dict(eqn.params, jaxpr=without_custom_rules(eqn.params["jaxpr"])))
        else:
            outs = eqn.primitive.bind(*values, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for var, value in zip(eqn.outvars, outs):
            if not isinstance(var, core.DropVar):
                env[var] = value
    return [read(atom) for atom in jaxpr.outvars]


def without_custom_rules(closed):
    """`closed` (a ClosedJaxpr) with every custom_vjp_call at its top level or inside a jit
    replaced by the call's forward program; `closed` itself where it holds none."""
    import jax
    if not _holds_custom_call(closed.jaxpr):
        return closed
    avals = [v.aval for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *args: _evaluate(closed.jaxpr, closed.consts, args))(
        *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
