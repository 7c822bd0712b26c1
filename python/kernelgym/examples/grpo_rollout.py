"""A multi-turn rollout of a chat model in a kernelgym episode, in the shape GRPO trainers consume.

``rollout(task, client, llm)`` plays one episode: the system prompt and the starter go to the
model, each reply is parsed into an action (kernelgym.text.parse_action) and stepped, and the
observation goes back as the next user message, until the episode ends or ``max_turns`` replies
were made. A reply that holds no action is not sent to the server, the model is told what was
wrong, and it costs ``parse_error_reward``: by default the reward's minimum (``reward_min`` of the
env, as kernelgym.adapters.trl does), below every outcome a kernel can have, so that a group
learns to answer in form. The result::

    {"prompt": [system, user],            # the messages the first completion was made from
     "turns": [{"completion": str,        # the model's reply
                "action": dict | None,    # the wire action, None when the reply did not parse
                "parse_error": str | None,
                "observation": str,       # the user message that answered it
                "reward": float}, ...],
     "rewards": [float per turn], "total_reward": float,
     "messages": [the whole conversation], "finished": bool,   # the episode ended
     "parse_error_reward": float}

A GRPO trainer draws a group of rollouts per prompt (same task, same seed) and normalizes
``total_reward`` (or the per-turn ``rewards``) within the group. ``llm`` is anything with
``complete(messages) -> str``; ``OpenAICompatibleChat`` talks to an OpenAI-compatible
``/chat/completions`` endpoint (vLLM, SGLang, llama.cpp's server, ...) with the standard library.

    build/cli/kernelgym serve &
    vllm serve Qwen/Qwen2.5-Coder-7B-Instruct &
    python -m kernelgym.examples.grpo_rollout --model Qwen/Qwen2.5-Coder-7B-Instruct --turns 4 --group 8

``rollout_group(task, address, llm, group_size)`` plays a GRPO group's rollouts at once (a thread
and a connection each) and adds each one's group-relative ``advantage``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kernelgym.client import Client
from kernelgym.group import group_relative_advantages
from kernelgym.text import ActionParseError, fence_language, observation_message, parse_action, system_prompt

class ChatModel(Protocol):
    def complete(self, messages: Sequence[Mapping[str, str]]) -> str: ...


class ChatError(RuntimeError):
    """The chat endpoint could not be reached or answered with something other than a completion."""


class OpenAICompatibleChat:
    """A client of an OpenAI-compatible chat-completions endpoint, with urllib only.

    ``base_url`` ends before ``/chat/completions`` (``http://127.0.0.1:8000/v1``). The key is read
    from the environment variable named ``api_key_env`` at each call; without it no
    ``Authorization`` header is sent (local servers need none). ``extra_body`` is merged into each
    request (``{"top_p": 0.95}``, a vLLM ``"seed"``, ...). ``last_usage`` holds the last reply's
    ``usage`` map.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 1.0,
        max_tokens: int = 4096,
        timeout_s: float = 600.0,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.last_usage: dict[str, Any] = {}

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        body = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            **self.extra_body,
        }
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode("utf-8", "replace")
            raise ChatError(f"POST {self.url}: HTTP {e.code} {e.reason}: {detail}") from e
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ChatError(f"POST {self.url}: no answer within {self.timeout_s:g} s: {reason}") from e
        try:
            reply = json.loads(raw)
            content = reply["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise ChatError(f"POST {self.url}: not a chat completion ({e!r}): {raw[:300]!r}") from e
        self.last_usage = reply.get("usage") or {}
        return content or ""  # a null content (a refusal, a tool call) is an empty reply


def parse_error_message(error: ActionParseError, backend: str = "cpu") -> dict[str, str]:
    """What the model is told when its reply held no action."""
    return {
        "role": "user",
        "content": (
            f"Your reply could not be read as an action: {error}\n"
            "Nothing was evaluated and the kernel is unchanged. Answer with the whole kernel in one "
            f"```{fence_language(backend)} block, SEARCH/REPLACE blocks, a unified diff in a ```diff block, or SUBMIT alone."
        ),
    }


def rollout(
    task: str,
    client: Client,
    llm: ChatModel,
    max_turns: int = 4,
    seed: int | None = None,
    *,
    backend: str = "cpu",
    reward: str = "log_speedup_gain",
    max_steps: int = 0,
    parse_error_reward: float | None = None,
) -> dict[str, Any]:
    """One episode of ``llm`` on ``task``, at most ``max_turns`` replies (the module's doc)."""
    info = client.get_task(task)
    made = client.make(task, backend=backend, reward=reward, max_steps=max_steps)
    env = made["env"]
    no_action = float(made["reward_min"]) if parse_error_reward is None else float(parse_error_reward)
    try:
        start = client.reset(env, seed=seed)
        prompt = [
            {"role": "system", "content": system_prompt(info, backend)},
            observation_message(start["observation"], info, backend),
        ]
        messages = list(prompt)
        turns: list[dict[str, Any]] = []
        finished = False
        for _ in range(max_turns):
            completion = llm.complete(messages)
            messages.append({"role": "assistant", "content": completion})
            try:
                action = parse_action(completion, backend)
            except ActionParseError as e:
                answer = parse_error_message(e, backend)
                turns.append(
                    {"completion": completion, "action": None, "parse_error": str(e),
                     "observation": answer["content"], "reward": no_action}
                )  # fmt: skip
                messages.append(answer)
                continue
            result = client.step(env, action)
            answer = observation_message(result["observation"], info, backend)
            turns.append(
                {"completion": completion, "action": action, "parse_error": None,
                 "observation": answer["content"], "reward": float(result["reward"])}
            )  # fmt: skip
            messages.append(answer)
            if result["terminated"] or result["truncated"]:
                finished = True
                break
    finally:
        client.close_env(env)
    rewards = [t["reward"] for t in turns]
    return {
        "prompt": prompt,
        "turns": turns,
        "rewards": rewards,
        "total_reward": sum(rewards),
        "messages": messages,
        "finished": finished,
        "parse_error_reward": no_action,
    }


def rollout_group(
    task: str,
    address: str,
    llm: ChatModel,
    group_size: int,
    max_turns: int = 4,
    seed: int | None = None,
    **rollout_kwargs: Any,
) -> list[dict[str, Any]]:
    """A GRPO group: ``group_size`` rollouts of one prompt (the same task and seed) played at once,
    one thread and one connection each (a ``Client`` belongs to one thread), so that the model's
    replies and the server's evaluations of the group overlap. Each result gains ``advantage``,
    its ``total_reward`` against the group's (kernelgym.group_relative_advantages). ``llm`` is
    called from several threads (``OpenAICompatibleChat`` may be)."""

    def one(_: int) -> dict[str, Any]:
        with Client(address) as client:
            return rollout(task, client, llm, max_turns=max_turns, seed=seed, **rollout_kwargs)

    with ThreadPoolExecutor(max_workers=group_size) as pool:
        results = list(pool.map(one, range(group_size)))
    for result, advantage in zip(results, group_relative_advantages([r["total_reward"] for r in results])):
        result["advantage"] = advantage
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One multi-turn rollout of a chat model in a kernelgym episode.")
    parser.add_argument("--connect", "--address", dest="address", default="tcp://127.0.0.1:5555", help="the kernelgym server's client endpoint")
    parser.add_argument("--task", default="cpu/softmax_rows")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument(
        "--base-url", default="http://127.0.0.1:8000/v1", help="the chat endpoint, before /chat/completions"
    )
    parser.add_argument("--model", required=True, help="the model name the endpoint serves")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--turns", type=int, default=4, help="replies at most")
    parser.add_argument("--seed", type=int, default=None, help="the episode's seed (inputs, timing)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per completion")
    parser.add_argument("--group", type=int, default=1, help="rollouts of the prompt played at once (a GRPO group)")
    parser.add_argument("--json", action="store_true", help="print the whole rollout(s) as JSON")
    args = parser.parse_args(argv)

    llm = OpenAICompatibleChat(
        args.base_url, args.model, args.api_key_env, args.temperature, args.max_tokens, args.timeout_s
    )
    results = rollout_group(args.task, args.address, llm, args.group, max_turns=args.turns, seed=args.seed,
                            backend=args.backend)
    if args.json:
        print(json.dumps(results if args.group > 1 else results[0], indent=2))
        return 0
    for g, result in enumerate(results):
        if args.group > 1:
            print(f"rollout {g + 1} of {args.group}:")
        for i, turn in enumerate(result["turns"], start=1):
            what = turn["action"]["kind"] if turn["action"] else f"parse error: {turn['parse_error']}"
            status = turn["observation"].splitlines()[1] if turn["action"] and "\n" in turn["observation"] else ""
            print(f"turn {i}: {what} -> reward {turn['reward']:+.3f}" + (f" | {status}" if status else ""))
        print(f"total reward {result['total_reward']:+.3f}" + (" (episode over)" if result["finished"] else "") +
              (f", advantage {result['advantage']:+.3f}" if args.group > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
