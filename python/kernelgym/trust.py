"""How far one evaluation's timing can be trusted: a verdict a trainer can filter on.

A speedup is a ratio of two medians over interleaved rounds, with a 95% confidence interval
(docs/results.md). On a shared machine the same kernel can measure 1.5x one minute and 1.9x the
next; the evaluation record says why, in pieces: the interval's width and convergence, the
rounds a backend discarded as disturbed (the cpu judge counts every round, so none there), the
reference's slowdown next to the candidate, and the host's load around the timing window
(``timing.host``, read by the runner from /proc). ``timing_trust(report)`` puts them in one dict, which the Gym env
adds to every step's ``info["timing_trust"]``, with a ``level``:

- ``"trusted"``: nothing past its limit (the limits below);
- ``"contended"``: the estimate itself looks sound (a tight interval from enough undisturbed
  rounds), but the host was busy — loaded, stolen from, or preempting many rounds — so a repeat
  may differ by more than the interval says;
- ``"noisy"``: the estimate itself is weak — a wide or unconverged interval, too few undisturbed
  rounds, or a reference slowed next to the candidate;
- ``"untimed"``: nothing was timed (a failure, or no clock of the target).

``trusted`` is ``level == "trusted"``; ``reasons`` name every limit passed.

    obs, reward, terminated, truncated, info = env.step(kernel)
    if info["timing_trust"]["level"] == "noisy":
        ...   # drop the sample, down-weight it, or re-evaluate later
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LIMITS", "MIN_UNDISTURBED_ROUNDS", "timing_trust"]

# Below this many undisturbed rounds the cpu backend estimates from all rounds, preempted ones
# included (tpu_runner/cpu/cpu_backend.cc), and an interval needs 6 (timing_stats.h).
MIN_UNDISTURBED_ROUNDS = 6

# Past any of these, an evaluation's timing is not trusted (each is a reason in the verdict).
LIMITS: dict[str, float] = {
    # the 95% interval's largest relative distance from the speedup: max(s/low, high/s) - 1
    "relative_half_width": 0.05,
    # rounds a backend discarded as disturbed, of all rounds (the estimate uses the others)
    "disturbed_fraction": 0.5,
    # the reference's median beside the candidate over its median alone, before the candidate
    # loaded: a busy neighbour (or a memory-streaming candidate) slows it
    "reference_slowdown": 1.3,
    # the 1-minute load average per CPU after the window
    "load_per_cpu": 1.0,
    # of all CPUs' time over the window, taken by the hypervisor
    "steal_fraction": 0.05,
}


def timing_trust(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """The verdict on one evaluation record (``info["report"]``; None or one without ``timing``:
    nothing was timed). Keys: ``level`` ("trusted", "contended", "noisy" or "untimed"), ``trusted`` (bool),
    ``reasons`` (list of str), and the figures judged — ``relative_half_width``, ``rounds``,
    ``disturbed_rounds``, ``disturbed_fraction``, ``converged``, ``reference_slowdown``, and the
    host's ``load_per_cpu``, ``procs_running``, ``cpus``, ``busy_fraction``, ``steal_fraction``
    (None where the record has no ``timing.host``)."""
    verdict: dict[str, Any] = {
        "level": "untimed", "trusted": False, "reasons": [],
        "relative_half_width": None, "rounds": 0, "disturbed_rounds": 0, "disturbed_fraction": None,
        "converged": None, "reference_slowdown": None,
        "load_per_cpu": None, "procs_running": None, "cpus": None, "busy_fraction": None, "steal_fraction": None,
    }
    timing = report.get("timing") if isinstance(report, Mapping) else None
    if not isinstance(timing, Mapping):
        verdict["reasons"].append("nothing was timed")
        return verdict
    reasons: list[str] = verdict["reasons"]
    speedup = _number(timing.get("speedup"))
    ci = timing.get("speedup_ci95") or [0, 0]
    low, high = _number(ci[0]), _number(ci[1])
    if speedup > 0 and low > 0 and high > 0:
        verdict["relative_half_width"] = max(speedup / low, high / speedup) - 1
    rounds, disturbed = int(_number(timing.get("rounds"))), int(_number(timing.get("discarded")))
    verdict.update(rounds=rounds, disturbed_rounds=disturbed, converged=bool(timing.get("converged")))
    verdict["disturbed_fraction"] = disturbed / rounds if rounds > 0 else None
    alone = _number(timing.get("reference_alone_median_ns"))
    beside = _number((timing.get("reference") or {}).get("median_ns"))
    if alone > 0 and beside > 0:
        verdict["reference_slowdown"] = beside / alone

    host = timing.get("host")
    if isinstance(host, Mapping):
        cpus = int(_number(host.get("cpus")))
        verdict.update(cpus=cpus, procs_running=int(_number(host.get("procs_running"))),
                       busy_fraction=_number(host.get("busy_fraction")),
                       steal_fraction=_number(host.get("steal_fraction")))
        if cpus > 0:
            verdict["load_per_cpu"] = _number(host.get("load_avg_1m")) / cpus

    weak: list[str] = []  # the estimate itself
    busy: list[str] = []  # the host around it
    if verdict["relative_half_width"] is None:
        weak.append("no confidence interval (too few rounds)")
    if rounds - disturbed < MIN_UNDISTURBED_ROUNDS:
        weak.append(f"too few undisturbed rounds: {rounds - disturbed} < {MIN_UNDISTURBED_ROUNDS} (the preempted ones were used)")
    if verdict["converged"] is False:
        weak.append("the interval did not reach its target within the timing budget")
    for key, what, into in (("relative_half_width", "the 95% interval is wide", weak),
                            ("reference_slowdown", "the reference ran slower than alone", weak),
                            ("disturbed_fraction", "many rounds were preempted", busy),
                            ("load_per_cpu", "the host was loaded", busy),
                            ("steal_fraction", "the hypervisor took CPU time", busy)):
        value = verdict[key]
        if value is not None and value > LIMITS[key]:
            into.append(f"{what}: {key} {value:.3g} > {LIMITS[key]:g}")
    reasons.extend(weak + busy)
    verdict["level"] = "noisy" if weak else "contended" if busy else "trusted"
    verdict["trusted"] = not reasons
    return verdict


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
