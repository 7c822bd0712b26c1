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
