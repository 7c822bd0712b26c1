"""The candidate's matmul work against the reference's, at every size set.

The proof (program_identity.py, decision_coverage.py, prefetch_coverage.py) follows the blocks a
kernel names and the windows it copies. Work can also go missing before a kernel sees its
operands: K padded by K/256 zero chunks and cut to a constant 3 (`jnp.pad(...)[:3]`) is all of K
where checked (2 and 3 chunks, the rest zeros) and 3 of 32 chunks at the full size; the kernel
then reads the whole of what it is given (red team, round 14: 5.52x trusted for 0.70x on gemm,
2.42x for 0.062x on swiglu_mlp). Whatever the form, such a program does a constant amount of work
where the reference's grows with the sizes: its matmul FLOPs as a share of the reference's fall,
from the checked sizes to the full one, by the ratio of the reference's own work (3/32 here).

So the share is measured at each size set (kernels: a grid step's MXU FLOPs, as the estimate's
floor counts them, times the grid's steps; XLA's dots outside them, loops times their trips) and
the full size's must not fall below a quarter of the largest checked size's. Tile waste where
checked (a block larger than a small checked dimension) raises the checked share, so the bound
is loose; a program that does its work honestly keeps the share."""
from __future__ import annotations

from . import tpu_estimate

# The full size's share of the reference's matmul work may be this much smaller than the largest
# checked size's (honest tiles padded at small checked sizes do more work there, never less).
MIN_SHARE_RATIO = 0.25


def problems(programs: dict, references: dict, fit_sets, target: str) -> list[str]:
    """`programs` and `references`: size set -> the candidate's and the reference's closed jaxprs."""
    work = {name: (program_flops(programs[name]), program_flops(references[name])) for name in (*fit_sets, target)}
    if any(reference is None or reference <= 0 for _, reference in work.values()):
        return []  # no floating-point matmul in the reference at some size: nothing to compare
    if any(candidate is None for candidate, _ in work.values()):
        return []  # work in loops of run-time trip counts: not counted (and not trusted: tpu_estimate)
    largest = max(fit_sets, key=lambda name: work[name][1])
    checked = work[largest][0] / work[largest][1]
    full = work[target][0] / work[target][1]
    if full >= MIN_SHARE_RATIO * checked:
        return []
    return [f"the candidate's matmul work is {full:.3g}x the reference's at the full size and {checked:.3g}x at the "
            f"{largest} sizes: work done where checked is missing at the full size (a constant amount where the "
            f"reference's grows, e.g. operands cut to a fixed part before the kernel)"]


def program_flops(closed_jaxpr) -> float | None:
    """Floating-point matmul FLOPs of a program: its kernels' (a grid step's MXU FLOPs, weighted by
    the steps that run each branch, times the grid's steps) and its dots outside them; None where a
    loop's trips or a grid's steps are known only at run time."""
    kernels, reasons = tpu_estimate.analyse_program(closed_jaxpr)
    total = 0.0
    for kernel in kernels:
        if not all(isinstance(g, int) for g in kernel.grid) or any("run time" in r for r in kernel.reasons):
            return None  # a grid or a loop whose size is known only at run time
        total += kernel.mxu_flops * tpu_estimate._points(kernel.grid)
    if any("while loop" in r for r in reasons):
        return None
    return total + _outside_kernels(closed_jaxpr.jaxpr)


def _outside_kernels(jaxpr) -> float:
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("pallas_call", "cond"):
            continue  # a kernel is counted above; a branch may not run
        total += tpu_estimate._float_matmul_flops(eqn)
        trips = int(eqn.params.get("length", 1)) if name == "scan" else 1
        total += trips * sum(_outside_kernels(sub) for sub in tpu_estimate._sub(eqn))
    return total
