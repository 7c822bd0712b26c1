"""The trainer adapters, each called the way its framework calls it, against a real cpu server.

TRL itself (with PyTorch) is too heavy for the test venv: the test makes exactly the call
GRPOTrainer._calculate_rewards makes — keyword arguments prompts, completions, completion_ids,
step, run_name, trainer_state and the dataset's columns, one value per completion — and checks
what TRL reads back: one float (or None) per completion, and a __name__. The rollout function is
called as GRPOTrainer._generate calls one (TRL 1.16), with a stand-in trainer (StandInTrainer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Client
from kernelgym.adapters.trl import KernelReward, KernelRollout, completion_text, kernelgym_rollout_reward

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


class CharTokenizer:
    """A stand-in for the trainer's processing_class: one token per character."""

    def batch_decode(self, ids, skip_special_tokens=False):
        assert skip_special_tokens
        return ["".join(map(chr, row)) for row in ids]


class StandInTrainer:
    """What KernelRollout uses of TRL 1.16's GRPOTrainer, which (with PyTorch) cannot be installed
    in the test venv: model.training, num_generations(_eval), processing_class.batch_decode and
    the generation path GRPOTrainer uses without a rollout_func, _tokenize_prompts and
    _generate_single_turn, here answering with scripted completions."""

    def __init__(self, replies, num_generations):
        self.model = type("Model", (), {"training": True})()
        self.num_generations = self.num_generations_eval = num_generations
        self.processing_class = CharTokenizer()
        self.replies = list(replies)

    def _tokenize_prompts(self, prompts):
        rendered = ["".join(f"<{m['role']}>{m['content']}" for m in p) + "<assistant>" for p in prompts]
        return [list(map(ord, r)) for r in rendered], None, {}

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        assert images is None and multimodal_fields == {} and num_generations == self.num_generations
        # vLLM's server mode generates num_generations completions per distinct prompt: TRL's
        # sampler has put each prompt num_generations times in a row.
        assert all(prompt_ids[i] == prompt_ids[i - i % num_generations] for i in range(len(prompt_ids)))
        completions = [self.replies.pop(0) for _ in prompt_ids]
        return [list(map(ord, c)) for c in completions], [[-0.5] * len(c) for c in completions]


def grpo_generate_and_reward(trainer, rollout_func, reward_funcs, inputs):
    """What GRPOTrainer._generate_and_score_completions does with a rollout_func (TRL 1.16): the
    prompts (each row already repeated num_generations times), the required keys, the extra fields
    merged into the rows, then each reward function called with prompts, completions,
    completion_ids and every other column of the rows."""
    prompts = [x["prompt"] for x in inputs]
    output = rollout_func(prompts, trainer)
    assert {"prompt_ids", "completion_ids", "logprobs"} <= output.keys()
    extra = {k: v for k, v in output.items() if k not in ("prompt_ids", "completion_ids", "logprobs")}
    contents = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
    completions = [[{"role": "assistant", "content": c}] for c in contents]
    for i, row in enumerate(inputs):
        for key, values in extra.items():
            row[key] = values[i]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    columns = {k: [row[k] for row in inputs] for k in keys}
    return output, [f(prompts=prompts, completions=completions, completion_ids=output["completion_ids"],
                      trainer_state=None, log_extra=None, log_metric=None, **columns) for f in reward_funcs]


def test_trl_rollout_func_steps_kernelgym_with_each_completion(start_server):
    server = start_server("--local-runners", "2")
    with Client(server.address) as client, KernelRollout(client=client) as rollout:
        (row,) = rollout.dataset(["cpu/softmax_rows"])  # the starter, evaluated: its observation is the prompt
        assert row["task"] == "cpu/softmax_rows" and "The starter kernel" in row["prompt"][1]["content"]
        before = completed(client)
        replies = [f"```cpp\n{FAST}```", f"```cpp\n{BROKEN}```", "I would vectorize it.",
                   f"```cpp\n// again\n{STARTER}```"]
        trainer = StandInTrainer(replies, num_generations=4)
        inputs = [dict(row) for _ in range(4)]
        output, (rewards,) = grpo_generate_and_reward(trainer, rollout, [kernelgym_rollout_reward], inputs)
        assert completed(client) - before == 3  # three completions held a kernel; the starter was not re-run
        assert output["kernelgym_status"] == ["ok", "compile_error", "no_action", "ok"]
        assert len(output["prompt_ids"]) == len(output["logprobs"]) == 4
        fast, broken, unparsed, again = rewards
        assert rewards == output["kernelgym_reward"] and fast > again > broken >= unparsed
        assert output["kernelgym_speedup"][0] > output["kernelgym_speedup"][3] > 0 == output["kernelgym_speedup"][2]
        with pytest.raises(ValueError, match="did not make"):
            rollout([[{"role": "user", "content": "another prompt"}]], StandInTrainer(["x"], 1))


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
