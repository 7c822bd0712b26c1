"""kernelgym as a verifiers 0.4 environment, against a real kernelgym server evaluating real cpu kernels.

verifiers itself is installed (scripts/python_venv.sh: the package and what ``import
verifiers.v1`` loads) and everything of it runs for real here — the config validation and plugin
lookup behind ``vf.load_environment`` (the taskset id resolving to this package), the taskset's
iteration, ``Segment``, ``Trace`` and its rewards — except the agent. verifiers' agent runs a
model through a harness program that it installs with uv and reaches through its interception
server, which needs a model endpoint and the network; so ``agents`` is a stand-in holding what
``KernelGymEnvironment.run`` uses of it: ``agents.agent.interaction(task)``, an async context
whose ``turn(message)`` returns a real ``vf.Segment`` (the model's scripted reply; a terminated
segment once the agent's turns are spent, as verifiers does at ``max_turns``) and whose ``trace``
is a real ``vf.Trace``. The stand-in refuses what verifiers' ``Interaction`` refuses: a bare first
turn on a task without a prompt, and any turn after a terminated segment."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers.v1", reason="verifiers is not installed (scripts/python_venv.sh)")

from kernelgym import Client, text  # noqa: E402
from kernelgym.adapters.verifiers import KernelGymEnvironment, load_environment  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STARTER = (REPO / "datasets/suites/cpu/softmax_rows/starter.cpp").read_text()
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
BROKEN = STARTER.replace("float sum = 0.0f;", "float sum = 0.0f")


class ScriptedInteraction:
    """What verifiers' ``Interaction`` gives an env: ``turn`` and ``trace``."""

    def __init__(self, task, replies: list[str]) -> None:
        self.trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data),
                              agent=vf.AgentInfo(config=vf.AgentConfig()))
        self.replies = list(replies)
        self.sent: list[str] = []
        self.over = False

    async def turn(self, message=None):
        if self.over:
            raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
        if message is None and not self.sent:
            raise ValueError("nothing to run a turn on")
        self.sent.append(message)
        if not self.replies:  # the agent's max_turns: the run ends instead of answering
            self.over = True
            return vf.Segment(messages=[], terminated=True)
        return vf.Segment(messages=[vf.AssistantMessage(content=self.replies.pop(0))])


class ScriptedAgent:
    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.interactions: list[ScriptedInteraction] = []

    @asynccontextmanager
    async def interaction(self, task):
        interaction = ScriptedInteraction(task, self.replies)
        self.interactions.append(interaction)
        yield interaction
        interaction.over = True  # leaving the context ends the exchange


class ScriptedAgents:
    def __init__(self, replies: list[str]) -> None:
        self.agent = ScriptedAgent(replies)


def fenced(source: str) -> str:
    return f"Here it is:\n```cpp\n{source}```"


def test_a_verifiers_rollout_is_a_kernelgym_episode(start_server):
    server = start_server("--local-runners", "1")
    env = load_environment(address=server.address, tasks=["cpu/softmax_rows"], max_turns=3)
    assert isinstance(env, KernelGymEnvironment) and isinstance(env, vf.Env)
    assert env.config.agent.max_turns == 3 and env.config.agent.harness.id == "null"
    (task,) = list(env.taskset)
    with Client(server.address) as client:
        client.hello()
        info = client.get_task("cpu/softmax_rows")
        assert task.data.task == "cpu/softmax_rows" and task.data.prompt is None  # the env opens the conversation
        assert task.data.system_prompt == text.system_prompt(info, "cpu")
        probe = client.make("cpu/softmax_rows", reward="log_speedup_gain")
        client.close_env(probe["env"])
        before = client.stats()

        # Two rollouts of one group at once: one plays to its submit, one runs out of turns.
        submits = ScriptedAgents([fenced(FAST), "I would vectorize it.", "SUBMIT"])
        runs_out = ScriptedAgents([fenced(BROKEN)])

        async def play():
            try:
                await asyncio.gather(env.run(task, submits), env.run(task, runs_out))
            finally:
                await env.stop()

        asyncio.run(play())
        # One reset for both (the starter evaluated once), then FAST, BROKEN and the submit's evaluation.
        after = client.stats()
        assert after["resets"] - before["resets"] == 1
        assert after["scheduler"]["completed"] - before["scheduler"]["completed"] == 4
        assert client.health()["sessions"] == 0  # the forks and the root are closed

    (played,) = submits.agent.interactions
    (short,) = runs_out.agent.interactions
    opening = played.sent[0]
    assert short.sent[0] == opening and "The starter kernel" in opening and STARTER.strip() in opening
    assert len(played.sent) == 3  # no turn after the episode ended
    assert played.sent[2].startswith("Your reply could not be read as an action")
    episode = played.trace.info["kernelgym"]
    assert episode["statuses"][:2] == ["ok", "no_action"] and episode["finished"]
    fast, unparsed, submitted = episode["rewards"]
    assert fast > 0  # log_speedup_gain: FAST beats the starter
    assert unparsed == probe["reward_min"]  # a reply with no action costs the reward's minimum
    assert played.trace.rewards["kernelgym"].score == pytest.approx(fast + unparsed + submitted)
    assert played.trace.metrics["kernelgym_steps"] == 2 and played.trace.metrics["kernelgym_parse_errors"] == 1
    assert played.trace.metrics["kernelgym_best_speedup"] > 1
    assert played.trace.reward == pytest.approx(played.trace.rewards["kernelgym"].score)

    assert len(short.sent) == 2 and short.over  # its observation went out, then max_turns ended it
    ended = short.trace.info["kernelgym"]
    assert ended["statuses"] == ["compile_error"] and not ended["finished"]
    assert short.trace.reward < 0 < played.trace.reward


def test_the_taskset_lists_the_servers_tasks_when_none_are_named(server):
    env = load_environment(address=server.address, suite="cpu", parse_error_reward=-3.0)
    names = [t.data.task for t in env.taskset]
    assert "cpu/softmax_rows" in names and all(n.startswith("cpu/") for n in names)
    assert env.kernelgym.parse_error_reward == -3.0
    # The plugin lookup verifiers does for `vf eval kernelgym-verifiers`.
    assert vf.environment_class("kernelgym-verifiers") is KernelGymEnvironment


# ---- vf-eval itself: verifiers' evaluation CLI, its real agent and harness, a local model endpoint ----


def test_vf_eval_plays_kernelgym_episodes_against_a_local_endpoint(start_server, tmp_path):
    """``vf-eval @ file.toml`` as a user runs it (docs/python.md), end to end: verifiers loads this
    taskset by its id, its ``null`` harness program runs under uv in a subprocess and talks to a
    local OpenAI-compatible endpoint (scripted: a faster kernel, then SUBMIT) through verifiers'
    interception server, and kernelgym evaluates each reply for real. The harness program's
    environment is built offline from the wheels scripts/python_venv.sh downloaded."""
    import json
    import os
    import subprocess
    import sys

    from chat_endpoint import ChatEndpoint

    venv_bin = Path(sys.executable).parent
    wheels = Path(sys.prefix) / "verifiers-harness-wheels"
    if not wheels.is_dir() or not (venv_bin / "vf-eval").exists():
        if os.environ.get("KERNELGYM_REQUIRE_TRAINERS"):
            pytest.fail(f"vf-eval or {wheels} is missing: run scripts/python_venv.sh")
        pytest.skip("vf-eval and its harness wheels are not installed (scripts/python_venv.sh)")
    server = start_server("--local-runners", "1")
    with ChatEndpoint([f"Vectorized:\n```cpp\n{FAST}```\n", "SUBMIT"]) as model:
        config = tmp_path / "eval.toml"
        config.write_text(f"""model = "tiny"
num_rollouts = 2
push = false
output_dir = "{tmp_path / 'out'}"
[client]
base_url = "{model.base_url}"
api_key_var = "OPENAI_API_KEY"
[env.taskset]
id = "kernelgym-verifiers"
address = "{server.address}"
tasks = ["cpu/softmax_rows"]
[env.agent]
max_turns = 4
""")
        env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
               "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(wheels), "UV_PYTHON_DOWNLOADS": "never",
               # a cache kept with the venv: the first run fills it from the wheels, later ones reuse it
               "UV_CACHE_DIR": str(Path(sys.prefix) / "uv-cache"), "OPENAI_API_KEY": "local"}
        run = subprocess.run([str(venv_bin / "vf-eval"), "@", str(config), "--no-rich"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert len(model.requests) == 4 and all(r["stream"] for r in model.requests)  # 2 rollouts x 2 turns

    (traces,) = (tmp_path / "out").glob("*/traces.jsonl")
    rollouts = [trace for line in traces.read_text().splitlines() for trace in json.loads(line)["traces"]]
    assert len(rollouts) == 2
    for trace in rollouts:
        assert trace["ok"] and not trace["errors"], trace["errors"]
        played = trace["info"]["kernelgym"]
        assert played["statuses"] == ["ok", "ok"] and played["finished"]  # the kernel, then its submit
        assert trace["metrics"]["kernelgym_steps"] == 2 and trace["metrics"]["kernelgym_best_speedup"] > 1
        # log_speedup_gain summed over the turns: the faster kernel's gain over the starter
        assert trace["rewards"]["kernelgym"]["score"] == pytest.approx(sum(played["rewards"])) and played["rewards"][0] > 0
