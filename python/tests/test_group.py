"""Group scoring (kernelgym.group): G candidates from one state in one call, on a real cpu server
with real kernels: compiled, checked and timed. What a GRPO trainer relies on: one reward per
candidate in order, the reward ordering contract (docs/adding_a_reward.md) visible in a real group,
the starter evaluated once (at reset), the env itself untouched, and the forks closed."""

from __future__ import annotations

from pathlib import Path

import pytest

import kernelgym
from kernelgym import Client, make

REPO = Path(__file__).resolve().parents[2]
TASK = "cpu/softmax_rows"
STARTER = (REPO / "datasets/suites/cpu/softmax_rows/starter.cpp").read_text()
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
BROKEN = STARTER.replace("float sum = 0.0f;", "float sum = 0.0f")  # a compile error
WRONG = STARTER.replace("yr[c] = yr[c] / sum;", "yr[c] = yr[c] / (sum + 1.0f);")  # runs, wrong answer


def completed(client: Client) -> int:
    return int(client.stats()["scheduler"]["completed"])


def test_a_group_is_scored_in_one_call_with_the_starter_evaluated_once(start_server):
    server = start_server("--local-runners", "2")
    with Client(server.address) as client, make(TASK, reward="log_speedup", client=client) as env:
        env.reset(seed=3)
        before = completed(client)
        scored = env.score([FAST, WRONG, BROKEN, STARTER + "\n// again\n"], group_relative=True)
        assert completed(client) - before == 4  # one evaluation per candidate; the starter is not re-run

        assert [s.status for s in scored] == ["ok", "incorrect", "compile_error", "ok"]
        fast, wrong, broken, again = scored
        # The ordering contract, in a real group: correct above failing, faster above slower,
        # a wrong answer above a compile error.
        assert fast.reward > again.reward > wrong.reward > broken.reward
        assert fast.speedup > again.speedup > 0
        assert "error" in broken.text and broken.text != wrong.text
        advantages = [s.advantage for s in scored]
        assert sum(advantages) == pytest.approx(0, abs=1e-9)
        assert advantages[0] == max(advantages) and advantages[2] == min(advantages)

        # The env itself was not stepped: its next step is step 1, from the starter.
        obs, *_ = env.step(STARTER + "\n// mine\n")
        assert int(obs["step"]) == 1
        # Every fork was closed: only this env is open on the server.
        assert client.health()["sessions"] == 1


def test_groups_of_many_prompts_are_scored_together(start_server):
    server = start_server("--local-runners", "2")
    with Client(server.address) as client:
        envs = [make(TASK, client=client) for _ in range(2)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        groups = kernelgym.score_groups([(envs[0], [FAST, BROKEN]), (envs[1], [WRONG])])
        assert [[s.status for s in group] for group in groups] == [["ok", "compile_error"], ["incorrect"]]
        assert groups[0][0].advantage is None
        for env in envs:
            env.close()


def test_a_malformed_candidate_is_refused_before_anything_is_sent(server):
    with Client(server.address) as client, make(TASK, backend="null", client=client) as env:
        env.reset(seed=1)
        sessions = client.health()["sessions"]
        with pytest.raises(TypeError):
            env.score([STARTER, 42])
        assert client.health()["sessions"] == sessions  # no fork was made


def test_group_relative_advantages():
    assert kernelgym.group_relative_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert kernelgym.group_relative_advantages([0.0, 2.0]) == [-1.0, 1.0]
    assert kernelgym.group_relative_advantages([]) == []


# ---- identical kernels, and noise (kernelgym.group: sharing evaluations, ties="interval") ----

EDITED = STARTER.replace("float sum = 0.0f;", "float sum = 0.0f;  // edited")


def test_eight_identical_kernels_share_one_evaluation_and_get_zero_advantages(start_server):
    server = start_server("--local-runners", "2")
    with Client(server.address) as client, make(TASK, reward="log_speedup", client=client) as env:
        env.reset(seed=5)
        before = completed(client)
        for ties in ("none", "interval"):  # sharing does not depend on the noise option
            scored = env.score([FAST] * 8, group_relative=True, ties=ties)
            assert [s.status for s in scored] == ["ok"] * 8
            assert len({s.reward for s in scored}) == 1 and scored[0].reward > 0
            assert [s.advantage for s in scored] == [0.0] * 8
            assert [s.same_as for s in scored] == [None] + [0] * 7
        assert completed(client) - before == 2  # one evaluation per group, not 8

        # The same kernel reached by two different actions: its own evaluation each, one outcome.
        edit = {"kind": "edit", "edits": [{"search": "float sum = 0.0f;", "replace": "float sum = 0.0f;  // edited"}]}
        scored = env.score([EDITED, edit, WRONG], group_relative=True, ties="none")
        assert scored[1].same_as == 0 and scored[0].reward == scored[1].reward
        assert scored[0].advantage == scored[1].advantage > scored[2].advantage
        assert scored[0].observation["source"] == scored[1].observation["source"]

        # Two different actions that do not apply made no kernel: each keeps its own message.
        missing = [{"kind": "edit", "edits": [{"search": f"not in the source {n}", "replace": "x"}]} for n in (1, 2)]
        first, second = env.score(missing)
        assert first.status == second.status == "invalid_action" and second.same_as is None
        assert "source 1" in first.observation["action_error"] and "source 2" in second.observation["action_error"]


def test_trl_reward_pays_identical_completions_identically(start_server):
    from kernelgym.adapters.trl import KernelReward

    server = start_server("--local-runners", "2")
    reply = f"Faster:\n```cpp\n{FAST}```\n"
    with KernelReward(server.address) as reward:
        rewards = reward(prompts=["p"] * 8, completions=[reply] * 8, task=[TASK] * 8)
        assert len(set(rewards)) == 1 and rewards[0] > 0
        assert kernelgym.group_relative_advantages(rewards) == [0.0] * 8


def _ok(speedup: float, low: float, high: float, reward: float) -> kernelgym.Scored:
    o = {"status": "ok", "speedup": speedup, "speedup_ci_low": low, "speedup_ci_high": high, "source": str(speedup)}
    return kernelgym.Scored(reward=reward, status="ok", speedup=speedup, text="", observation=o, server_reward=reward)


def test_overlapping_intervals_are_a_tie_and_separate_ones_are_not():
    from kernelgym.group import _tie_overlapping

    failed = kernelgym.Scored(reward=-5.0, status="compile_error", speedup=0.0, text="", observation={"status": "compile_error"},
                              server_reward=-5.0)
    row = [_ok(1.02, 0.98, 1.06, 0.0198), _ok(0.99, 0.95, 1.03, -0.0101), failed,
           _ok(1.50, 1.45, 1.55, 0.405), _ok(1.05, 1.01, 1.09, 0.0488)]
    out = _tie_overlapping(row)
    # 0.99, 1.02 and 1.05 overlap each other pairwise: one tie, paid its mean; 1.5 stands apart.
    tie = (0.0198 - 0.0101 + 0.0488) / 3
    assert [s.reward for s in out] == pytest.approx([tie, tie, -5.0, 0.405, tie])
    assert out[0].tied_with == (0, 1, 4) and out[3].tied_with == () and out[2].tied_with == ()
    assert [s.server_reward for s in out] == [s.reward for s in row]  # the server's are kept
    assert kernelgym.group_relative_advantages([out[i].reward for i in (0, 1, 4)]) == [0.0] * 3

    # A chain of small overlaps does not tie its ends: 1.00 and 1.12 do not overlap.
    chain = _tie_overlapping([_ok(1.00, 0.97, 1.03, 0.0), _ok(1.06, 1.02, 1.10, 0.058), _ok(1.12, 1.08, 1.16, 0.113)])
    assert chain[0].tied_with == (0, 1) and chain[2].tied_with == ()
    assert chain[2].reward > chain[0].reward == chain[1].reward


def test_ties_must_be_a_known_option(server):
    with Client(server.address) as client, make(TASK, backend="null", client=client) as env:
        env.reset(seed=1)
        with pytest.raises(ValueError, match="ties"):
            env.score([STARTER], ties="median")
