"""Which pallas_calls of a program the compiler may run in either order: those neither of which
reads, directly or through other operations, what the other wrote. XLA may schedule such calls in
any order, so the compiled kernels' order says nothing of which call each one is (tpu_estimate's
pairing of compiled kernels with traced calls uses this)."""
from __future__ import annotations

from .jaxpr_check import subjaxprs as _bodies


def independent_pairs(closed_jaxpr) -> set:
    """{frozenset({i, j})} of the pallas_calls (numbered in the order tpu_estimate.analyse_program
    meets them: the equations in order, each body after its equation) whose data do not meet."""
    calls: list[frozenset] = []  # per call, the calls its operands come from

    def walk(jaxpr, inputs: list) -> list:
        deps = {id(v): d for v, d in zip(jaxpr.invars, inputs)}

        def of(var) -> frozenset:
            return deps.get(id(var), frozenset())

        for eqn in jaxpr.eqns:
            operands = frozenset().union(*(of(v) for v in eqn.invars)) if eqn.invars else frozenset()
            if eqn.primitive.name == "pallas_call":
                index = len(calls)
                calls.append(operands)
                out = operands | {index}
            else:
                out = operands
                for body in _bodies(eqn):
                    # A body sees every operand (a conservative join); what it computes joins the outputs.
                    inner = walk(body, [operands] * len(body.invars))
                    out = out | frozenset().union(*inner) if inner else out
            for var in eqn.outvars:
                deps[id(var)] = out
        return [of(v) for v in jaxpr.outvars]

    walk(closed_jaxpr.jaxpr, [frozenset()] * len(closed_jaxpr.jaxpr.invars))
    return {frozenset({i, j}) for j in range(len(calls)) for i in range(j)
            if i not in calls[j] and j not in calls[i]}
