"""The examples run: the random knobs agent against the real cpu backend, a GRPO rollout against a
scripted chat endpoint (a local HTTP server speaking the chat-completions protocol)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

import kernelgym
from kernelgym.client import Client
from kernelgym.text import ActionParseError, parse_action

PYTHON_DIR = Path(__file__).resolve().parents[1]
EXAMPLES = PYTHON_DIR / "kernelgym" / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kernelgym_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_random_knobs_agent_steps_the_cpu_backend(start_server):
    server = start_server("--local-runners", "1")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH", "")) if p)
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "random_knobs_agent.py"), "--address", server.address,
         "--task", "cpu/softmax_rows", "--steps", "2", "--seed", "3"],
        check=False, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("cpu/softmax_rows: knobs EXP in ['std::exp', 'exp_poly']")
    assert lines[1].startswith("step 0 (starter): ok, speedup ")
    steps = [x for x in lines if x.startswith(("step 1:", "step 2:"))]
    assert len(steps) == 2
    for line in steps:
        # Every combination of the task's knobs is correct (tests/integration/knobs_test.cc).
        assert "EXP=" in line and "RECOMPUTE=" in line and "SIMD=" in line
        assert "-> ok, speedup " in line, line
    assert lines[-1].startswith("best: ") and "speedup" in lines[-1]


def test_pallas_episode_through_a_pallas_runner(start_server):
    # The real pallas backend (jax, libtpu's deviceless compile, interpret mode) behind the server.
    server = start_server("--local-runners", "1", "--local-runner-backends", "pallas")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH", "")) if p)
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "pallas_episode.py"), "--address", server.address, "--task", "cpu/silu_mul"],
        check=False, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    text = run.stdout
    assert "status: ok (stage correctness)" in text
    assert "no TPU on this host" in text
    assert "speed: estimated" in text and "not a measurement" in text and "tpu kernel " in text
    assert "status: compile_error" in text and "divisible by 8 and 128" in text
    assert "submitted the starter again (reward +0.000)" in text


def test_random_knobs_agent_refuses_a_task_without_knobs(server):
    agent = load_example("random_knobs_agent")
    assert agent.main(["--address", server.address, "--task", "jaxbench-p/flash_attention", "--backend", "null"]) == 2


# ---- a scripted chat-completions endpoint ----


class ScriptedChat:
    """Serves POST /v1/chat/completions with the scripted replies in order; keeps each request.
    ``together=n``: each request is answered only once n are in flight (10 s at most, then 503),
    so a client that asks one at a time fails."""

    def __init__(self, replies: list[str], together: int = 1) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.barrier = threading.Barrier(together, timeout=10) if together > 1 else None
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions" or not chat.replies:
                    self.send_error(404 if chat.replies else 503, "no such path or no reply left")
                    return
                if chat.barrier is not None:
                    try:
                        chat.barrier.wait()
                    except threading.BrokenBarrierError:
                        self.send_error(503, "the other requests of the group never came")
                        return
                chat.requests.append(body)
                chat.headers.append(dict(self.headers))
                content = chat.replies.pop(0)
                answer = json.dumps(
                    {
                        "id": f"chatcmpl-{len(chat.requests)}",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": len(content), "total_tokens": 10 + len(content)},
                    }
                ).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedChat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


KERNEL = (
    "#include <cmath>\n#include <cstdint>\n\n"
    'extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {\n'
    "  for (int64_t r = 0; r < R; ++r) {\n"
    "    const float* xr = x + r * C;\n    float* yr = y + r * C;\n    float m = xr[0];\n"
    "    for (int64_t c = 1; c < C; ++c) m = std::fmax(m, xr[c]);\n"
    "    float sum = 0.0f;\n"
    "    for (int64_t c = 0; c < C; ++c) sum += (yr[c] = std::exp(xr[c] - m));\n"
    "    const float inv = 1.0f / sum;\n"
    "    for (int64_t c = 0; c < C; ++c) yr[c] *= inv;\n"
    "  }\n}\n"
)
SCRIPT = [
    f"The division can become a multiplication.\n\n```cpp\n{KERNEL}```\n",
    "I believe the kernel is now optimal; the loops are memory-bound.",
    "SUBMIT",
]


def test_grpo_rollout_with_a_scripted_model(server, monkeypatch):
    grpo = load_example("grpo_rollout")
    monkeypatch.setenv("KERNELGYM_TEST_KEY", "sk-test")
    with Client(server.address) as client, ScriptedChat(SCRIPT) as chat:
        llm = grpo.OpenAICompatibleChat(
            chat.base_url,
            "scripted",
            api_key_env="KERNELGYM_TEST_KEY",
            temperature=0.7,
            max_tokens=512,
            timeout_s=30,
        )
        result = grpo.rollout("cpu/softmax_rows", client, llm, max_turns=4, seed=11, backend="null")

    assert [m["role"] for m in result["prompt"]] == ["system", "user"]
    assert "cpu/softmax_rows" in result["prompt"][0]["content"] and "SEARCH" in result["prompt"][0]["content"]
    assert "## cpu/softmax_rows | step 0" in result["prompt"][1]["content"]

    first, second, third = result["turns"]
    assert first["completion"] == SCRIPT[0]
    assert first["action"] == {"kind": "replace", "source": KERNEL} and first["parse_error"] is None
    assert first["observation"].startswith("## cpu/softmax_rows | step 1 ")
    assert second["action"] is None
    with pytest.raises(ActionParseError) as expected:
        parse_action(SCRIPT[1])
    assert second["parse_error"] == str(expected.value)
    assert "found no fenced code block" in second["parse_error"]
    assert second["observation"].startswith("Your reply could not be read as an action: ")
    assert third["action"] == {"kind": "submit"}
    assert third["observation"].startswith("## cpu/softmax_rows | step 2 ")  # the parse error was no step

    # The null backend answers speedup 1: no gain, no penalty; the unparsable reply costs the
    # reward's minimum (log_speedup_gain's: -1, below a compile failure's -0.3).
    assert result["parse_error_reward"] == -1.0
    assert result["rewards"] == [0.0, -1.0, 0.0]
    assert result["total_reward"] == pytest.approx(-1.0)
    assert result["finished"] is True  # submit ended the episode before max_turns

    # What the endpoint saw: the conversation so far each time, with the parse error told back.
    assert len(chat.requests) == 3
    assert all(r["model"] == "scripted" and r["temperature"] == 0.7 and r["max_tokens"] == 512 for r in chat.requests)
    assert chat.requests[0]["messages"] == result["prompt"]
    assert chat.requests[2]["messages"][-2] == {"role": "assistant", "content": SCRIPT[1]}
    assert chat.requests[2]["messages"][-1]["content"] == second["observation"]
    assert chat.requests[2]["messages"] == result["messages"][:-2]
    assert all(h.get("Authorization") == "Bearer sk-test" for h in chat.headers)
    assert llm.last_usage["completion_tokens"] == len("SUBMIT")


def test_grpo_rollout_stops_at_max_turns(server):
    grpo = load_example("grpo_rollout")
    with Client(server.address) as client, ScriptedChat(["no action here", "nor here"]) as chat:
        llm = grpo.OpenAICompatibleChat(chat.base_url, "scripted", api_key_env="KERNELGYM_UNSET_KEY_FOR_TESTS")
        result = grpo.rollout("cpu/softmax_rows", client, llm, max_turns=2, backend="null")
    assert result["rewards"] == [result["parse_error_reward"]] * 2 and result["parse_error_reward"] < 0
    assert result["finished"] is False
    assert all("Authorization" not in h for h in chat.headers)


def test_a_grpo_group_is_played_at_once(server):
    # Three rollouts of one prompt, one reply each: the chat endpoint answers only when all three
    # asked (rollouts one after another would wait 10 s and fail), one reply submits and two hold
    # no action; the group's advantages say which.
    grpo = load_example("grpo_rollout")
    with ScriptedChat(["SUBMIT", "no action here", "nor here"], together=3) as chat:
        llm = grpo.OpenAICompatibleChat(chat.base_url, "scripted", api_key_env="KERNELGYM_UNSET_KEY_FOR_TESTS")
        results = grpo.rollout_group("cpu/softmax_rows", server.address, llm, 3, max_turns=1, seed=5, backend="null")
    assert len(chat.requests) == 3
    totals = sorted(r["total_reward"] for r in results)
    assert totals == [-1.0, -1.0, 0.0]  # the submit (null backend: speedup 1, reward 0) and two no-actions
    best = max(results, key=lambda r: r["total_reward"])
    assert best["turns"][0]["action"] == {"kind": "submit"} and best["finished"] is True
    assert best["advantage"] == pytest.approx(2 ** 0.5)
    assert sorted(r["advantage"] for r in results)[:2] == pytest.approx([-(2 ** 0.5) / 2] * 2)
    assert sum(r["advantage"] for r in results) == pytest.approx(0.0)


def test_chat_errors_say_what_was_called():
    grpo = load_example("grpo_rollout")
    with ScriptedChat([]) as chat:
        llm = grpo.OpenAICompatibleChat(chat.base_url, "scripted", timeout_s=10)
        with pytest.raises(grpo.ChatError, match=r"POST http://127\.0\.0\.1:\d+/v1/chat/completions: HTTP 503"):
            llm.complete([{"role": "user", "content": "hi"}])


def test_grpo_main_prints_each_turn(server, capsys):
    grpo = load_example("grpo_rollout")
    with ScriptedChat([f"```cpp\n{KERNEL}```", "SUBMIT"]) as chat:
        code = grpo.main(
            ["--address", server.address, "--backend", "null", "--base-url", chat.base_url, "--model", "m",
             "--turns", "3", "--seed", "5"]
        )  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("turn 1: replace -> reward +0.000 | status: ok")
    assert lines[1].startswith("turn 2: submit -> reward +0.000")
    assert lines[2] == "total reward +0.000 (episode over)"


def test_the_examples_ship_with_the_installed_package():
    import importlib

    for name in ("random_knobs_agent", "pallas_episode", "grpo_rollout", "ray_rollouts"):
        module = importlib.import_module(f"kernelgym.examples.{name}")
        assert callable(module.main), name
    assert callable(kernelgym.text.parse_action)  # `import kernelgym` is enough for kernelgym.text
