"""kernelgym as an OpenEnv environment, driven the way OpenEnv users drive one: OpenEnv's own
server (``create_fastapi_app`` under uvicorn) hosting ``KernelGymEnvironment``, and OpenEnv's own
clients — ``GenericEnvClient`` over the WebSocket session, and plain HTTP ``/reset`` / ``/step``
— against a real kernelgym server evaluating real cpu kernels."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (scripts/python_venv.sh)")
requests = pytest.importorskip("requests")
uvicorn = pytest.importorskip("uvicorn")

from openenv.core import GenericEnvClient  # noqa: E402

from kernelgym import Client  # noqa: E402
from kernelgym.adapters.openenv import KernelAction, KernelGymEnvironment, create_kernelgym_app  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STARTER = (REPO / "datasets/suites/cpu/softmax_rows/starter.cpp").read_text()
FAST = (REPO / "tests/honest/softmax_rows_avx2/kernel.cpp").read_text()
BROKEN = STARTER.replace("float sum = 0.0f;", "float sum = 0.0f")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenEnvServer:
    """OpenEnv's app for a kernelgym task, under uvicorn in a thread of this process."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OpenEnvServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=1).ok:
                    return self
            except requests.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("the OpenEnv server did not start")

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def cpu_server(start_server):
    return start_server("--local-runners", "1")


@pytest.fixture
def openenv(cpu_server) -> Iterator[OpenEnvServer]:
    with OpenEnvServer(create_kernelgym_app("cpu/softmax_rows", cpu_server.address, reward="log_speedup")) as s:
        yield s


def test_an_openenv_client_plays_a_kernelgym_episode(openenv):
    with GenericEnvClient(base_url=openenv.url).sync() as env:
        first = env.reset(seed=3)
        assert first.observation["status"] == "ok" and first.observation["step"] == 0
        assert "softmax" in first.observation["text"].lower()
        assert first.done is False and first.reward is None
        starter_speedup = first.observation["speedup"]

        broken = env.step({"kind": "replace", "source": BROKEN})
        assert broken.observation["status"] == "compile_error"
        fast = env.step({"reply": f"Vectorized:\n```cpp\n{FAST}```"})  # a model's reply, parsed
        assert fast.observation["status"] == "ok"
        assert fast.observation["speedup"] > starter_speedup
        assert fast.reward > broken.reward  # the ordering contract, through OpenEnv
        assert fast.observation["info"]["eval_seconds"] > 0  # the server's info rides along

        # No action in a reply, or a malformed action: no step, told why, paid the reward's least
        # (the episode contract of docs/python.md: as the TRL and verifiers adapters pay it).
        nothing = env.step({"reply": "I would vectorize it."})
        assert nothing.observation["status"] == "no_action" and nothing.observation["action_error"]
        assert nothing.reward is not None and nothing.reward < broken.reward
        malformed = env.step({"kind": "patch"})  # a patch without its diff
        assert malformed.observation["status"] == "invalid_action" and "`diff`" in malformed.observation["action_error"]
        assert malformed.reward == nothing.reward
        empty = env.step({"kind": "edit", "edits": []})  # refused by the server's own check
        assert empty.observation["status"] == "invalid_action" and empty.reward == nothing.reward
        assert env.state()["step_count"] == 2

        tuned = env.step({"kind": "knobs", "knobs": {"SIMD": 1, "EXP": "exp_poly", "RECOMPUTE": 0}})
        assert tuned.observation["status"] == "ok", tuned.observation["message"]
        assert tuned.observation["source"] != fast.observation["source"]  # the template, instantiated
        same = env.step({"kind": "knobs", "values": {"SIMD": 1, "EXP": "exp_poly", "RECOMPUTE": 0}})  # the wire's name
        assert same.observation["source"] == tuned.observation["source"]
        back = env.step({"kind": "revert", "to_step": 2})
        assert back.observation["source"] == fast.observation["source"]

        done = env.step({"kind": "submit"})
        assert done.done is True and done.observation["status"] == "ok"
        state = env.state()
        assert state["task"] == "cpu/softmax_rows" and state["step_count"] == 6
        assert state["best_speedup"] == pytest.approx(done.observation["best_speedup"])
        assert state["best_speedup"] >= fast.observation["speedup"]


def test_two_sessions_are_two_episodes_closed_with_their_sessions(openenv, cpu_server):
    with Client(cpu_server.address) as client:
        before = client.stats()["sessions"]
        with GenericEnvClient(base_url=openenv.url).sync() as a, GenericEnvClient(base_url=openenv.url).sync() as b:
            a.reset()
            b.reset()
            a.step({"kind": "replace", "source": BROKEN})
            assert a.state()["env"] != b.state()["env"]
            assert a.state()["step_count"] == 1 and b.state()["step_count"] == 0
            assert client.stats()["sessions"] == before + 2
        # OpenEnv closes an Environment with its session: the kernelgym envs go with them.
        deadline = time.monotonic() + 10
        while client.stats()["sessions"] != before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.stats()["sessions"] == before


def test_bad_actions_are_refused_with_a_reason(openenv, server):
    # Over plain HTTP: an unknown field is OpenEnv's validation error; a kind without its field is ours.
    unknown = requests.post(openenv.url + "/step", json={"action": {"sourcecode": "x"}}, timeout=60)
    assert unknown.status_code == 422
    env = KernelGymEnvironment("cpu/softmax_rows", address=server.address, backend="null")
    env.reset(seed=0)
    for action, why in ((KernelAction(kind="patch"), "`diff`"),
                        (KernelAction(kind="knobs", knobs={"SIMD": 1}, values={"SIMD": 0}), "not both"),
                        (KernelAction(), "needs `kind`")):
        refused = env.step(action)
        assert refused.status == "invalid_action" and why in refused.action_error
        assert refused.reward == env._env.env_info["reward_min"] and env.state.step_count == 0
    env.close()


def test_a_client_closing_its_session_logs_no_error(openenv):
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        for _ in range(2):
            with GenericEnvClient(base_url=openenv.url).sync() as env:
                env.reset(seed=1)
        time.sleep(0.5)  # the server side of the close runs after the client has gone
    finally:
        logger.removeHandler(handler)
    # openenv-core's endpoint closes the socket a second time once the client has; uvicorn logged
    # that as an ERROR with a 60-line traceback at every disconnect, until the app's middleware.
    assert [r.getMessage() for r in errors] == []
