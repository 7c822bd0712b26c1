"""The trainer adapters, each called the way its framework calls it, against a real cpu server.

TRL itself (with PyTorch) is too heavy for the test venv: the test makes exactly the call
GRPOTrainer._calculate_rewards makes — keyword arguments prompts, completions, completion_ids,
step, run_name, trainer_state and the dataset's columns, one value per completion — and checks
what TRL reads back: one float (or None) per completion, and a __name__."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Client
from kernelgym.adapters.trl import KernelReward, completion_text

REPO = Path(__file__).resolve().parents[2]
STARTER = (REPO / "datasets/suites/cpu/softmax_rows/starter.cpp").read_text()
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
BROKEN = STARTER.replace("float sum = 0.0f;", "float sum = 0.0f")


def completed(client: Client) -> int:
    return int(client.stats()["scheduler"]["completed"])


def test_trl_calls_the_reward_function_as_grpo_trainer_does(start_server):
    server = start_server("--local-runners", "2")
    with Client(server.address) as client, KernelReward(client=client) as reward:
        assert reward.__name__ == "kernelgym_log_speedup"
        prompt = [{"role": "user", "content": "Optimize cpu/softmax_rows."}]
        completions = [
            [{"role": "assistant", "content": f"Here it is:\n```cpp\n{FAST}```"}],
            [{"role": "assistant", "content": f"```cpp\n{BROKEN}```"}],
            [{"role": "assistant", "content": "I would vectorize it."}],  # no action at all
            [{"role": "assistant", "content": f"<think>maybe</think>\n```cpp\n// again\n{STARTER}```"}],
        ]
        rewards = reward(prompts=[prompt] * 4, completions=completions, completion_ids=[[1], [2], [3], [4]], step=0,
                         run_name="out", trainer_state=None, task=["cpu/softmax_rows"] * 4, difficulty=["easy"] * 4)
        assert len(rewards) == 4 and all(isinstance(r, float) for r in rewards)
        fast, broken, unparsed, again = rewards
        assert fast > again > broken >= unparsed  # the ordering contract, through TRL's call
        # A second batch of the same task (standard-format completions): the starter is not re-run.
        before = completed(client)
        second = reward(prompts=["p", "p"], completions=[f"```cpp\n// b\n{FAST}```", "no code"],
                        task=["cpu/softmax_rows"] * 2)
        assert completed(client) - before == 1  # only the one parseable completion was evaluated
        assert second[0] > second[1]


def test_the_task_column_is_required_and_named_in_the_error(server):
    with KernelReward(server.address, backend="null") as reward:
        with pytest.raises(ValueError, match="'task'"):
            reward(prompts=["p"], completions=["x"])


def test_completion_text_reads_both_dataset_formats():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) == "a"


def test_verl_calls_the_reward_function_in_both_of_its_shapes(start_server):
    from kernelgym.adapters import verl

    server = start_server("--local-runners", "2")
    info = {"task": "cpu/softmax_rows", "address": server.address}
    try:
        # The naive reward manager: one call per sample, keyword arguments.
        fast = verl.compute_score(data_source="kernelgym", solution_str=f"```cpp\n{FAST}```", ground_truth=None,
                                  extra_info=info)
        broken = verl.compute_score(data_source="kernelgym", solution_str=f"```cpp\n{BROKEN}```",
                                    ground_truth="cpu/softmax_rows", extra_info={"address": server.address})
        assert isinstance(fast, float) and fast > broken
        # The batch reward manager: lists.
        scores = verl.compute_score_batch(data_sources=["kernelgym"] * 3,
                                          solution_strs=[f"```cpp\n// v\n{FAST}```", "no code", f"```cpp\n{BROKEN}```"],
                                          ground_truths=[None] * 3, extra_infos=[info] * 3)
        assert len(scores) == 3 and scores[0] > scores[2] >= scores[1]
    finally:
        verl.close()


def test_envs_closed_by_the_server_between_batches_are_made_again(start_server):
    # An idle timeout of 1 s: the env kept after the first batch is gone by the second.
    server = start_server("--local-runners", "0", "--null-backend", "--idle-timeout", "1")
    with KernelReward(server.address, backend="null") as reward:
        first = reward(completions=[f"```cpp\n{STARTER}```"], task=["cpu/softmax_rows"])
        import time

        time.sleep(2.5)
        second = reward(completions=[f"```cpp\n// b\n{STARTER}```"], task=["cpu/softmax_rows"])
        assert len(first) == len(second) == 1 and second[0] is not None
