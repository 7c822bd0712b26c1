"""kernelgym.trust: the verdict on how far an evaluation's timing can be trusted, from the record's
figures (synthetic records here, each limit crossed alone), and on a real cpu evaluation, where
the runner reports the host's load around the timing window (timing.host) and the env puts the
verdict in every step's info."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import kernelgym
from kernelgym.trust import LIMITS, timing_trust

REPO = Path(__file__).resolve().parents[2]
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()

QUIET = {"timing": {
    "speedup": 2.0, "speedup_ci95": [1.98, 2.03], "converged": True, "rounds": 40, "discarded": 2,
    "reference": {"median_ns": 1000.0}, "reference_alone_median_ns": 980.0,
    "host": {"cpus": 2, "load_avg_1m": 0.4, "procs_running": 1, "busy_fraction": 0.5, "steal_fraction": 0.0}}}


def with_timing(**changes) -> dict:
    report = copy.deepcopy(QUIET)
    for key, value in changes.items():
        if key in report["timing"]["host"]:
            report["timing"]["host"][key] = value
        else:
            report["timing"][key] = value
    return report


def test_a_quiet_tight_measurement_is_trusted():
    verdict = timing_trust(QUIET)
    assert verdict["level"] == "trusted" and verdict["trusted"] and verdict["reasons"] == []
    assert verdict["relative_half_width"] == pytest.approx(0.015)
    assert verdict["disturbed_fraction"] == pytest.approx(0.05)
    assert verdict["load_per_cpu"] == pytest.approx(0.2)
    assert verdict["reference_slowdown"] == pytest.approx(1000 / 980)


@pytest.mark.parametrize("changes, level, reason", [
    (dict(speedup_ci95=[1.8, 2.3]), "noisy", "interval is wide"),
    (dict(converged=False), "noisy", "did not reach its target"),
    (dict(discarded=36), "noisy", "too few undisturbed rounds"),
    (dict(reference_alone_median_ns=500.0), "noisy", "reference ran slower"),
    (dict(speedup_ci95=[0, 0]), "noisy", "no confidence interval"),
    (dict(discarded=25), "contended", "many rounds were preempted"),
    (dict(load_avg_1m=5.0), "contended", "host was loaded"),
    (dict(steal_fraction=0.2), "contended", "hypervisor"),
])
def test_each_limit_crossed_alone_names_itself(changes, level, reason):
    verdict = timing_trust(with_timing(**changes))
    assert verdict["level"] == level and not verdict["trusted"]
    assert len(verdict["reasons"]) >= 1 and any(reason in r for r in verdict["reasons"]), verdict["reasons"]


def test_a_weak_estimate_on_a_busy_host_is_noisy_and_says_both():
    verdict = timing_trust(with_timing(converged=False, load_avg_1m=9.0))
    assert verdict["level"] == "noisy"
    assert any("target" in r for r in verdict["reasons"]) and any("loaded" in r for r in verdict["reasons"])


def test_untimed_records_and_records_without_host():
    assert timing_trust(None)["level"] == "untimed"
    assert timing_trust({"status": "compile_error"})["level"] == "untimed"
    older = copy.deepcopy(QUIET)
    del older["timing"]["host"]  # a record from a runner that does not read /proc
    verdict = timing_trust(older)
    assert verdict["level"] == "trusted" and verdict["load_per_cpu"] is None
    assert LIMITS["load_per_cpu"] == 1.0


def test_a_real_evaluation_reports_the_host_and_its_verdict(start_server):
    server = start_server("--local-runners", "1")
    with kernelgym.make("cpu/softmax_rows", address=server.address) as env:
        _, info = env.reset(seed=0)
        assert info["timing_trust"]["level"] in ("trusted", "contended", "noisy")  # the starter was timed
        _, _, _, _, info = env.step(FAST)
        host = info["report"]["timing"]["host"]  # read by the runner from /proc around the window
        assert host["cpus"] >= 1 and host["procs_running"] >= 1 and 0 <= host["busy_fraction"] <= 1
        verdict = info["timing_trust"]
        assert verdict["cpus"] == host["cpus"] and verdict["load_per_cpu"] == pytest.approx(host["load_avg_1m"] / host["cpus"])
        assert verdict["rounds"] == info["report"]["timing"]["rounds"] > 0
        _, _, _, _, info = env.step("int broken(")  # a compile error: nothing timed
        assert info["timing_trust"]["level"] == "untimed"
