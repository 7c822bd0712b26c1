"""The trainers themselves, on CPU: TRL's ``GRPOTrainer`` for 2 steps with ``KernelReward`` and with
``rollout_func=KernelRollout``, against a real cpu server with real evaluations.

The model is tiny (a 2-layer Llama of width 32, made from a config) and the tokenizer is trained
here, from the repository's kernels and docs (the ``tokenizers`` library): nothing is downloaded
at test time. A random model writes nothing a kernel parser reads, so two of its weights are set
to make it write one thing: the tokenizer has one added token whose text is a whole reply (a
fenced, faster softmax kernel), every token's embedding has a large first coordinate, and the
output row of that token reads it. Everything else — TRL's chat templating, tokenizing,
generation, log-probabilities, the GRPO loss and the optimizer step — is TRL's and transformers'
own code at the pinned versions (scripts/python_venv.sh), including the private methods
``KernelRollout`` calls (``_tokenize_prompts``, ``_generate_single_turn``): a TRL release that
renames them fails here.

Every completion of a group is the same kernel, so kernelgym evaluates it once per batch and the
group's rewards are equal: TRL logs a reward standard deviation of 0 (no noise turned into
advantage). Without TRL installed the tests skip, unless KERNELGYM_REQUIRE_TRAINERS is set
(scripts/test.sh sets it), where they fail.
"""

from __future__ import annotations

import importlib
import math
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TASK = "cpu/softmax_rows"
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
REPLY = f"A faster softmax:\n```cpp\n{FAST}```\n"


def _require(module: str):
    if os.environ.get("KERNELGYM_REQUIRE_TRAINERS"):
        return importlib.import_module(module)  # a trainer missing from the venv fails the suite
    return pytest.importorskip(module)


torch = _require("torch")
transformers = _require("transformers")
trl = _require("trl")
datasets = _require("datasets")
tokenizers = _require("tokenizers")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama and a BPE tokenizer trained here, saved as a model folder; it writes REPLY."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = [p.read_text() for p in sorted((REPO / "datasets/suites/cpu").glob("*/starter.cpp"))]
    corpus += [p.read_text() for p in sorted((REPO / "docs").glob("*.md"))[:6]]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1024, special_tokens=["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_tokens([AddedToken(REPLY, normalized=False, special=False)])
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>")
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    reply_id = tokenizer.convert_tokens_to_ids(REPLY)
    assert reply_id == len(tokenizer) - 1

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16384, tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 8.0   # a coordinate every position carries
        model.lm_head.weight[reply_id, 0] = 40.0       # which the reply's logit reads
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _config(output_dir: Path, **overrides):
    settings = dict(output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=4,
                    max_completion_length=2, max_steps=2, learning_rate=1e-5, logging_steps=1, report_to="none",
                    save_strategy="no", use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0)
    settings.update(overrides)
    return trl.GRPOConfig(**settings)


def _step_logs(trainer) -> list[dict]:
    return [entry for entry in trainer.state.log_history if "loss" in entry]


def test_grpo_trainer_trains_two_steps_with_kernel_reward(start_server, tiny_model, tmp_path):
    from kernelgym.adapters.trl import KernelReward

    server = start_server("--local-runners", "1")
    with KernelReward(server.address) as reward:
        rows = reward.dataset([TASK], measurements=False)  # reproducible prompts: no timings in them
        assert "speedup" not in rows[0]["prompt"][1]["content"]
        trainer = trl.GRPOTrainer(model=str(tiny_model), reward_funcs=[reward],
                                  train_dataset=datasets.Dataset.from_list(rows * 8), args=_config(tmp_path))
        trainer.train()
        logs = _step_logs(trainer)
        assert len(logs) == 2 and trainer.state.global_step == 2
        for entry in logs:
            # Every completion was the faster kernel, evaluated and paid: one reward, no spread.
            assert entry["rewards/kernelgym_log_speedup/mean"] > 0
            assert entry["rewards/kernelgym_log_speedup/std"] == 0
            assert entry["frac_reward_zero_std"] == 1
            assert math.isfinite(entry["loss"])


def test_grpo_trainer_trains_two_steps_with_kernel_rollout(start_server, tiny_model, tmp_path):
    from kernelgym.adapters.trl import KernelRollout, kernelgym_rollout_reward

    server = start_server("--local-runners", "1")
    with KernelRollout(server.address, reward="log_speedup") as rollout:
        rows = rollout.dataset([TASK])
        trainer = trl.GRPOTrainer(model=str(tiny_model), reward_funcs=[kernelgym_rollout_reward],
                                  rollout_func=rollout, train_dataset=datasets.Dataset.from_list(rows * 8),
                                  args=_config(tmp_path))
        trainer.train()
        logs = _step_logs(trainer)
        assert len(logs) == 2
        for entry in logs:
            assert entry["rewards/kernelgym_rollout_reward/mean"] > 0
            assert entry["rewards/kernelgym_rollout_reward/std"] == 0
            assert math.isfinite(entry["loss"])
