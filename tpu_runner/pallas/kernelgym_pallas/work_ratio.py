"""The candidate's work against the reference's, at every size set.

The proof (program_identity.py, decision_coverage.py, prefetch_coverage.py) follows the blocks a
kernel names and the windows it copies. Work can also go missing before a kernel sees its
operands: K padded by K/256 zero chunks and cut to a constant 3 (`jnp.pad(...)[:3]`) is all of K
where checked (2 and 3 chunks, the rest zeros) and 3 of 32 chunks at the full size; the kernel
then reads the whole of what it is given (red team, round 14: 5.52x trusted for 0.70x on gemm,
2.42x for 0.062x on swiglu_mlp). Rows cut so, with the output rebuilt at the full size by writing
the rows computed into zeros, did the same on rms_norm, cross_entropy, attention's heads and
megablox's rows (round 15: 2.97x to 29.9x trusted). Whatever the form, such a program does a
constant amount of work where the reference's grows with the sizes: its work as a share of the
reference's falls, from the checked sizes to the full one, by the ratio of the reference's own
growth (3/32 for the K chunks).

So the share is measured at each size set, where the reference multiplies matrices: floating-point
matmul FLOPs (round 15's compute measure, for references without a matmul, is gone: it refused
ragged_dot's own VISIT=pairs knob, 0.0145 of its checked share, and the cuts it named are named by
layout_cuts.py). Kernels count a grid step's work, weighted by the steps that run each branch (as
the estimate's floor counts it), times the grid's steps; XLA's operations outside them count with
their loops' trips. Only work that is used and
that follows the inputs counts: the program is cut to what its outputs need first (XLA deletes
the rest), and an operation none of whose operands follows an input (a matmul of two zero arrays,
round 15's way to lift the matmul share) is folded away by the compiler. The full size's share
must not fall below a sixteenth of the largest checked size's (MIN_SHARE_RATIO: a backstop; a
share can be padded with work that costs nothing, red team round 16, and layout_cuts.py names
the cut itself).
Tile waste where checked (a block larger than a small checked dimension) raises the checked
share, so the bound is loose; a program that does its work honestly keeps its share."""
from __future__ import annotations

from . import tpu_estimate

# The full size's share of the reference's work may be this much smaller than the largest checked
# size's. A backstop for gross cuts, not the proof (layout_cuts.py names the layout that cuts,
# whatever work is done beside it): an honest kernel that skips the blocks the reference computes
# and then masks (sink_sparse_attention's KEY_BLOCKS=visible) has 0.094 of the checked share at the
# full size, exactly what K cut to 3 of 32 chunks has on gemm, and a quarter refused it.
MIN_SHARE_RATIO = 1 / 16
def problems(programs: dict, references: dict, fit_sets, target: str) -> list[str]:
    """`programs` and `references`: size set -> the candidate's and the reference's closed jaxprs."""
    names = (*fit_sets, target)
    candidate = {name: program_work(programs[name]) for name in names}
    reference = {name: program_work(references[name]) for name in names}
    if any(work is None for work in candidate.values()):
        return []  # work in loops of run-time trip counts: not counted (and not trusted: tpu_estimate)
    if any(reference[name] is None for name in names):
        return []
    if any(reference[name] <= 0 for name in names):
        return []  # the reference has no floating-point matmul at some size: nothing to compare
    largest = max(fit_sets, key=lambda name: reference[name])
    checked = candidate[largest] / reference[largest]
    full = candidate[target] / reference[target]
    if full < MIN_SHARE_RATIO * checked:
        return [f"the candidate's matmul FLOPs are {full:.3g}x the reference's at the full size and {checked:.3g}x "
                f"at the {largest} sizes: work done where checked is missing at the full size (a constant amount "
                f"where the reference's grows, e.g. operands cut to a fixed part before the kernel)"]
    return []


def program_work(closed_jaxpr) -> float | None:
    """The floating-point matmul FLOPs of the used work of a program that follows its inputs; None
    where a loop's trips or a grid's steps are known only at run time."""
    import types
    from jax._src.interpreters import partial_eval as pe
    jaxpr = closed_jaxpr.jaxpr
    try:
        jaxpr, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    except Exception:  # a program dce does not take: counted whole (more work, never less)
        pass
    # analyse_program reads the equations only (the cut program's constants are not rebuilt)
    kernels, reasons = tpu_estimate.analyse_program(types.SimpleNamespace(jaxpr=jaxpr))
    if any("while loop" in r for r in reasons):
        return None
    per_kernel = iter(kernels)
    total = [0.0]

    def walk(jaxpr, follows: set, trips: float) -> bool:
        """Adds the work of `jaxpr`'s equations that follow the inputs (a branch's count 0 trips:
        it may not run); whether any output follows them."""
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            data = any(v in follows for v in eqn.invars if not hasattr(v, "val"))
            if name == "pallas_call":  # in analyse_program's order: program order, bodies included
                kernel = next(per_kernel)
                if not all(isinstance(g, int) for g in kernel.grid) or any("run time" in r for r in kernel.reasons):
                    raise _RunTime
                if data:
                    steps = tpu_estimate._points(kernel.grid) * trips
                    total[0] += kernel.mxu_flops * steps
            else:
                subs = list(tpu_estimate._sub(eqn))
                if subs:
                    inner_trips = 0.0 if name == "cond" else \
                        trips * (int(eqn.params.get("length", 1)) if name == "scan" else 1)
                    for sub in subs:
                        if walk(sub, set(sub.invars) if data else set(), inner_trips):
                            data = True
                elif data:
                    total[0] += trips * tpu_estimate._float_matmul_flops(eqn)
            if data:
                follows.update(eqn.outvars)
        return any(v in follows for v in jaxpr.outvars)

    try:
        walk(jaxpr, set(jaxpr.invars), 1.0)
    except _RunTime:
        return None
    return total[0]


class _RunTime(Exception):
    """A kernel whose grid or loops have a size known only at run time."""
