"""KernelGymEnv against a real server: the null backend (deterministic, instant) for the API and
the spaces, one short episode on the cpu backend."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from kernelgym import Client
from kernelgym.env import ENV_ID, KernelGymEnv, make
from kernelgym.errors import EpisodeOver, UnknownEnv
from kernelgym.spaces import SAMPLE_CHARSET, EnvSpaces, UnicodeText, feature_bounds

TASK = "cpu/softmax_rows"  # has knobs: EXP (strings), RECOMPUTE and SIMD (integers)


@pytest.fixture
def env(server):
    e = make(TASK, backend="null", address=server.address, max_steps=4)
    yield e
    e.close()


def test_check_env_passes_without_warnings(server):
    env = make(TASK, backend="null", address=server.address, max_steps=4)
    try:
        assert env.spec is not None and env.spec.nondeterministic is False  # so the determinism checks run
        # check_step_determinism steps twice with the action that action_space.seed(123) samples; a
        # `patch` that does not apply would differ in its wall time ("after 3 ms"), so it must not be one.
        env.action_space.seed(123)
        assert env.action_kinds[env.action_space.sample()["kind"]] != "patch"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        assert [str(w.message) for w in caught] == []
    finally:
        env.close()


def test_gymnasium_make_through_the_registry(server):
    env = gymnasium.make(ENV_ID, task=TASK, backend="null", address=server.address, max_steps=4)
    try:
        assert isinstance(env.unwrapped, KernelGymEnv)
        obs, info = env.reset(seed=7)
        assert info["seed"] == 7
        assert obs in env.observation_space
        assert env.render() == obs["text"]
    finally:
        env.close()


def test_observation_space_follows_hello(env):
    hello = env.hello
    space = env.observation_space
    assert isinstance(space, spaces.Dict)
    assert set(space) == {
        "text", "source", "status", "stage", "message", "action_error",
        "speedup", "speedup_ci_low", "speedup_ci_high", "best_speedup",
        "step", "steps_left", "reused", "features",
    }  # fmt: skip
    features = space["features"]
    assert features.dtype == np.float32 and features.shape == (len(hello["feature_names"]),)
    assert env.feature_names == tuple(hello["feature_names"])
    for i, name in enumerate(hello["feature_names"]):
        assert (features.low[i], features.high[i]) == feature_bounds(name)
    assert feature_bounds("status_ok") == (0.0, 1.0)
    assert feature_bounds("log_speedup") == (-20.0, 20.0)
    assert feature_bounds("log10_arithmetic_intensity") == (-6.0, 6.0)
    assert space["step"] == spaces.Discrete(5) and space["steps_left"] == spaces.Discrete(5)
    assert space["text"].max_length == hello["max_message_bytes"]
    assert space["speedup"].dtype == np.float64 and space["speedup"].shape == ()


def test_action_space_covers_every_kind_and_the_task_knobs(env):
    space = env.action_space
    assert env.action_kinds == tuple(env.hello["action_kinds"])
    assert space["kind"] == spaces.Discrete(len(env.action_kinds))
    assert space["to_step"] == spaces.Discrete(5)
    declared = env.task_info["knobs"]
    assert set(space["knobs"]) == set(declared)
    for name, knob in declared.items():
        assert space["knobs"][name] == spaces.Discrete(len(knob["values"]))
    assert isinstance(space["edits"], spaces.Sequence)


def test_a_task_without_knobs_has_no_knobs_member(server):
    with Client(server.address, timeout_s=30) as client:
        plain = [t["id"] for t in client.list_tasks() if not client.get_task(t["id"])["knobs"]]
        assert plain, "every task has knobs now: pick another way to test this"
        with make(plain[0], backend="null", client=client) as e:
            assert "knobs" not in e.action_space
            e.reset(seed=1)
            obs, *_ = e.step({"kind": e.action_kinds.index("knobs")})  # sends {}: the task has none
            assert obs["status"] == "invalid_action"


def test_samples_of_every_kind_become_their_wire_action(env):
    env.action_space.seed(3)
    sample = env.action_space.sample()
    kinds = env.action_kinds
    wire = {kind: env.spaces.wire_action({**sample, "kind": np.int64(kinds.index(kind))}) for kind in kinds}
    assert wire["replace"] == {"kind": "replace", "source": sample["source"]}
    assert wire["patch"] == {"kind": "patch", "diff": sample["diff"]}
    assert wire["edit"] == {"kind": "edit", "edits": [dict(e) for e in sample["edits"]]}
    assert wire["revert"] == {"kind": "revert", "to_step": int(sample["to_step"])}
    assert type(wire["revert"]["to_step"]) is int
    assert wire["submit"] == {"kind": "submit"}
    declared = env.task_info["knobs"]
    assert wire["knobs"] == {
        "kind": "knobs",
        "values": {name: declared[name]["values"][int(i)] for name, i in sample["knobs"].items()},
    }
    # Every sampled kind steps without an error reply (an inapplicable one is an observation).
    for kind in kinds:
        env.reset(seed=1)
        obs, reward, *_ = env.step({**sample, "kind": kinds.index(kind)})
        assert obs in env.observation_space
        assert isinstance(reward, float)


def test_step_takes_wire_dicts_and_plain_strings(env):
    env.reset(seed=1)
    obs, *_ = env.step({"kind": "knobs", "values": {"EXP": "exp_poly", "SIMD": np.int64(1)}})
    assert obs["status"] == "ok"
    assert "#define EXP exp_poly" in obs["source"] and "#define SIMD 1" in obs["source"]
    obs, *_ = env.step("// a new kernel\n")
    assert obs["source"] == "// a new kernel\n"
    obs, *_ = env.step({"kind": "revert", "to_step": 0})
    assert obs["source"] == env.task_info["versions"]["cpu"]["starter_source"]
    assert obs["reused"] == 1


def test_bad_actions_raise_before_sending(env):
    env.reset(seed=1)
    with pytest.raises(ValueError, match="at least one"):
        env.step({"kind": env.action_kinds.index("edit"), "edits": ()})
    with pytest.raises(ValueError, match="not an index"):
        env.step({"kind": len(env.action_kinds)})
    with pytest.raises(ValueError, match="outside"):
        env.step({"kind": env.action_kinds.index("knobs"), "knobs": {"SIMD": 5}})
    with pytest.raises(TypeError):
        env.step(42)
    obs, *_ = env.step({"kind": "submit"})  # nothing was sent: the episode is still at step 0
    assert obs["step"] == 1


def test_an_inapplicable_action_is_an_observation(env):
    env.reset(seed=1)
    obs, _, terminated, truncated, _ = env.step({"kind": "edit", "edits": [{"search": "no such", "replace": ""}]})
    assert obs["status"] == "invalid_action" and obs["action_error"] != ""
    assert obs["source"] == env.task_info["versions"]["cpu"]["starter_source"]
    assert obs in env.observation_space
    assert (terminated, truncated) == (False, False)


def test_non_ascii_sources_are_in_the_space(env):
    env.reset(seed=1)
    source = "// µs → ✓, 日本語, emoji 🚀, NUL-free \t\x0b\x0c\r\n" + env.task_info["versions"]["cpu"]["starter_source"]
    obs, *_ = env.step(source)
    assert obs["source"] == source
    assert obs in env.observation_space
    assert env.action_space["source"].contains(source)


def test_observation_values_and_info(env):
    obs, info = env.reset(seed=11)
    assert obs["step"] == 0 and obs["steps_left"] == 4 and obs["status"] == "ok"
    assert type(obs["step"]) is np.int64 and type(obs["reused"]) is np.int64
    assert obs["speedup"].dtype == np.float64 and float(obs["speedup"]) == 1.0
    assert obs["features"].dtype == np.float32
    assert obs["features"][env.feature_names.index("status_ok")] == 1.0
    assert info["seed"] == 11
    assert type(info["seconds_left"]) is float and type(info["eval_seconds"]) is float
    assert info["report"]["status"] == "ok"  # the rest of the observation is in info
    assert "report" not in obs and "seconds_left" not in obs


def test_truncation_termination_and_episode_over(env):
    env.reset(seed=1)
    for step in range(1, 5):
        obs, _, terminated, truncated, _ = env.step(f"// step {step}\n")
        assert obs["step"] == step and obs["steps_left"] == 4 - step
        assert terminated is False and truncated is (step == 4)
    with pytest.raises(EpisodeOver):
        env.step("// one too many\n")
    env.reset(seed=1)
    _, _, terminated, truncated, info = env.step({"kind": "submit"})
    assert (terminated, truncated) == (True, False) and info["submit"] is True
    with pytest.raises(EpisodeOver):
        env.step({"kind": "submit"})


def test_unseeded_resets_repeat_after_a_seeded_one(env):
    seeds = []
    for _ in range(2):
        env.reset(seed=99)
        seeds.append([env.reset()[1]["seed"] for _ in range(3)])
    assert seeds[0] == seeds[1]
    assert all(0 <= s < 2**53 for s in seeds[0])
    assert len(set(seeds[0])) == 3


def test_render(server, env):
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.render()
    obs, _ = env.reset(seed=1)
    assert env.render() == obs["text"] and obs["text"].startswith("## " + TASK)
    quiet = make(TASK, backend="null", address=server.address, render_mode=None)
    try:
        quiet.reset(seed=1)
        with pytest.warns(UserWarning, match="render_mode"):
            assert quiet.render() is None
    finally:
        quiet.close()
    with pytest.raises(ValueError, match="render_mode"):
        make(TASK, backend="null", address=server.address, render_mode="human")


def test_fork_is_independent(env):
    env.reset(seed=1)
    env.step("// parent 1\n")
    twin = env.fork()
    try:
        assert twin.env_id != env.env_id
        obs, *_ = twin.step("// twin 2\n")
        assert obs["step"] == 2 and obs["source"] == "// twin 2\n"
        obs, *_ = env.step({"kind": "revert", "to_step": 1})
        assert obs["step"] == 2 and obs["source"] == "// parent 1\n"
    finally:
        twin.close()
    env.step("// the shared connection is still open\n")


def test_close_is_idempotent_and_leaves_a_passed_client_open(server):
    with Client(server.address, timeout_s=30) as client:
        env = make(TASK, backend="null", client=client)
        env_id = env.env_id
        env.reset(seed=1)
        env.close()
        env.close()
        assert env.env_id is None
        with pytest.raises(gymnasium.error.ClosedEnvironmentError):
            env.reset()
        with pytest.raises(UnknownEnv):
            client.reset(env_id)  # the server env is gone, the client still works
        assert client.hello()["protocol"] == 1


def test_unicode_text_contains_every_string_and_samples_its_charset():
    text = UnicodeText(8)
    assert text.contains("") and text.contains("µ→✓🚀\x00\x7f") and not text.contains("123456789")
    assert not text.contains(b"bytes") and not text.contains(3)
    text.seed(0)
    assert all(set(text.sample()) <= set(SAMPLE_CHARSET) for _ in range(20))
    assert text == UnicodeText(8) and text != UnicodeText(9)
    assert text != spaces.Text(8, min_length=0, charset=SAMPLE_CHARSET)
    assert not text.is_np_flattenable


def test_env_spaces_reject_a_feature_vector_of_another_length(env):
    hello = {**env.hello, "feature_names": env.hello["feature_names"][:-1]}
    layout = EnvSpaces(hello, env.task_info, 4)
    wire = env.client.reset(env.env_id, seed=1)
    with pytest.raises(ValueError, match="features"):
        layout.observation(wire["observation"], wire["info"])


def test_cpu_backend_evaluates_the_softmax_starter(start_server):
    s = start_server("--local-runners", "1")
    env = make(TASK, backend="cpu", address=s.address, max_steps=2)
    try:
        obs, info = env.reset(seed=5)
        assert obs["status"] == "ok", obs["text"]
        assert float(obs["speedup"]) > 0
        obs, _, terminated, truncated, info = env.step(env.task_info["versions"]["cpu"]["starter_source"] + "\n// same code\n")
        assert obs["status"] == "ok", obs["text"]
        assert obs["reused"] == 0 and info["runner"] != "null"
        assert obs in env.observation_space
        assert (terminated, truncated) == (False, False)
    finally:
        env.close()
