"""KernelGymVectorEnv against the null backend, step by step against the reference semantics:
gymnasium's SyncVectorEnv over KernelGymEnv instances, same seeds, same actions, every autoreset
mode, episodes that end by truncation (max_steps) and by termination (submit)."""

from __future__ import annotations

import re
from contextlib import closing

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from kernelgym import Client
from kernelgym.env import ENV_ID, KernelGymEnv
from kernelgym.errors import UnknownEnv
from kernelgym.vector import KernelGymVectorEnv, make_vec

TASK = "cpu/softmax_rows"
NUM_ENVS = 3
MAX_STEPS = 3

# Per step, each sub-env's action kind. Sub-env 0 submits at its 2nd step of an episode and is
# truncated otherwise; sub-env 1 never submits (truncated every MAX_STEPS steps); sub-env 2
# submits at once, then edits, patches, reverts and sets knobs. With NEXT_STEP the sub-env that
# ended ignores the next row's action.
KINDS = [
    ("replace", "replace", "submit"),
    ("submit", "edit", "replace"),
    ("replace", "patch", "knobs"),
    ("knobs", "replace", "revert"),
    ("revert", "submit", "submit"),
    ("replace", "knobs", "edit"),
    ("submit", "replace", "patch"),
    ("replace", "revert", "submit"),
    ("submit", "submit", "replace"),
]


def batched_actions(space: gymnasium.spaces.Dict, kinds: tuple[str, ...], action_kinds: tuple[str, ...], seed: int):
    """A batched action-space sample whose `kind` is the given kinds (the other members are
    random, as a policy sampling the space would send)."""
    space.seed(seed)
    actions = space.sample()
    actions["kind"] = np.array([action_kinds.index(k) for k in kinds], dtype=actions["kind"].dtype)
    return actions


# A patch that does not apply says how long GNU patch ran ("exit 2 after 3 ms",
# env/episode/source_edits.cc): the one part of a null-backend observation that is not a function
# of the seed and the actions.
_WALL_TIME = re.compile(r"after \d+ ms")


def scrub(data):
    if isinstance(data, str):
        return _WALL_TIME.sub("after N ms", data)
    if isinstance(data, dict):
        return {key: scrub(value) for key, value in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(scrub(item) for item in data)
    if isinstance(data, np.ndarray) and data.dtype == object:
        out = np.empty(data.shape, dtype=object)
        for index, item in np.ndenumerate(data):
            out[index] = scrub(item)
        return out
    return data


def assert_same(ours, reference, what: str) -> None:
    ours, reference = scrub(ours), scrub(reference)
    assert data_equivalence(ours, reference, exact=True), f"{what} differs:\nours: {ours!r}\nreference: {reference!r}"


def make_pair(server, mode: AutoresetMode):
    ours = KernelGymVectorEnv(
        TASK, NUM_ENVS, backend="null", address=server.address, max_steps=MAX_STEPS, autoreset_mode=mode
    )
    reference = SyncVectorEnv(
        [
            lambda: KernelGymEnv(TASK, backend="null", address=server.address, max_steps=MAX_STEPS)
            for _ in range(NUM_ENVS)
        ],
        autoreset_mode=mode,
    )
    return ours, reference


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
def test_autoreset_matches_sync_vector_env(server, mode):
    ours, reference = make_pair(server, mode)
    try:
        assert ours.single_observation_space == reference.single_observation_space
        assert ours.single_action_space == reference.single_action_space
        assert ours.metadata["autoreset_mode"] == reference.metadata["autoreset_mode"] == mode
        action_kinds = ours.spaces.action_kinds

        assert_same(ours.reset(seed=42), reference.reset(seed=42), "reset")
        ends = {"terminated": 0, "truncated": 0, "final_obs": 0}
        for t, kinds in enumerate(KINDS):
            actions = batched_actions(ours.action_space, kinds, action_kinds, seed=t)
            got = ours.step(actions)
            want = reference.step(actions)
            for name, a, b in zip(("observations", "rewards", "terminations", "truncations", "infos"), got, want):
                assert_same(a, b, f"step {t}: {name}")
            assert got[0] in ours.observation_space
            ends["terminated"] += int(got[2].sum())
            ends["truncated"] += int(got[3].sum())
            ends["final_obs"] += int(got[4].get("_final_obs", np.zeros(1, bool)).sum())
            if mode == AutoresetMode.DISABLED and (got[2] | got[3]).any():
                mask = got[2] | got[3]
                assert_same(
                    ours.reset(options={"reset_mask": mask}),
                    reference.reset(options={"reset_mask": mask.copy()}),
                    f"step {t}: masked reset",
                )
        # The sequence really exercised both ways of ending, and SAME_STEP's final observations.
        assert ends["terminated"] >= 3 and ends["truncated"] >= 2
        assert (ends["final_obs"] > 0) == (mode == AutoresetMode.SAME_STEP)
    finally:
        ours.close()
        reference.close()


def test_next_step_resets_on_the_step_after_the_end_and_ignores_its_action(server):
    with closing(make_vec(TASK, 2, backend="null", address=server.address, max_steps=MAX_STEPS)) as envs:
        envs.reset(seed=1)
        obs, rewards, terminated, truncated, _ = envs.step([{"kind": "submit"}, "// a\n"])
        assert terminated.tolist() == [True, False] and obs["step"].tolist() == [1, 1]
        # Sub-env 0's action is ignored (not even converted): it is reset.
        obs, rewards, terminated, truncated, infos = envs.step([object(), "// b\n"])
        assert obs["step"].tolist() == [0, 2] and rewards[0] == 0.0
        assert terminated.tolist() == [False, False] and truncated.tolist() == [False, False]
        assert infos["_seed"].tolist() == [True, False]  # the reset's info for sub-env 0 only


def test_same_step_puts_the_last_step_in_final_obs_and_final_info(server):
    envs = make_vec(TASK, 2, backend="null", address=server.address, max_steps=MAX_STEPS, autoreset_mode="SameStep")
    try:
        envs.reset(seed=1)
        obs, _, terminated, _, infos = envs.step(["// a\n", {"kind": "submit"}])
        assert terminated.tolist() == [False, True]
        assert obs["step"].tolist() == [1, 0]  # sub-env 1 is already reset
        assert infos["_final_obs"].tolist() == [False, True]
        assert infos["final_obs"][1]["step"] == 1 and infos["final_info"]["submit"][1]
        assert infos["final_obs"][0] is None
    finally:
        envs.close()


def test_disabled_refuses_to_step_an_ended_env(server):
    envs = make_vec(
        TASK, 2, backend="null", address=server.address, max_steps=MAX_STEPS, autoreset_mode=AutoresetMode.DISABLED
    )
    try:
        envs.reset(seed=1)
        envs.step([{"kind": "submit"}, "// a\n"])
        with pytest.raises(RuntimeError, match="reset_mask"):
            envs.step(["// b\n", "// b\n"])
        obs, infos = envs.reset(options={"reset_mask": np.array([True, False])})
        assert obs["step"].tolist() == [0, 1] and infos["_seed"].tolist() == [True, False]
        with pytest.raises(TypeError, match="reset_mask"):
            envs.reset(options={"reset_mask": [True, False]})
        with pytest.raises(ValueError, match="at least one"):
            envs.reset(options={"reset_mask": np.zeros(2, dtype=bool)})
        obs, *_ = envs.step(["// b\n", "// b\n"])
        assert obs["step"].tolist() == [1, 2]
    finally:
        envs.close()


class SpyClient(Client):
    """Records the order of sends and receives."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events: list[str] = []

    def send(self, op, **fields):
        self.events.append("send " + op)
        return super().send(op, **fields)

    def recv(self, timeout_s=None):
        reply = super().recv(timeout_s)
        self.events.append("recv")
        return reply


def test_a_step_sends_every_request_before_waiting_for_any_reply(server):
    with SpyClient(server.address, timeout_s=30) as client:
        envs = make_vec(TASK, 4, backend="null", client=client)
        assert client.events == ["send env.make"] * 4 + ["recv"] * 4  # made concurrently too
        envs.reset(seed=0)
        client.events.clear()
        envs.step(["// x\n"] * 4)
        assert client.events == ["send env.step"] * 4 + ["recv"] * 4
        envs.close()
        assert client.hello()["protocol"] == 1  # the passed client stays open


def test_batched_spaces_and_per_env_action_forms(server):
    with closing(make_vec(TASK, 2, backend="null", address=server.address, max_steps=MAX_STEPS)) as envs:
        obs, _ = envs.reset(seed=3)
        assert obs in envs.observation_space
        assert obs["features"].shape == (2, len(envs.hello["feature_names"])) and obs["features"].dtype == np.float32
        assert isinstance(obs["source"], tuple) and len(obs["source"]) == 2
        sample = envs.single_action_space.sample()
        sample["kind"] = envs.spaces.action_kinds.index("replace")
        obs, *_ = envs.step([sample, {"kind": "knobs", "values": {"SIMD": 1}}])
        assert obs["source"][0] == sample["source"] and "#define SIMD 1" in obs["source"][1]
        assert envs.render() == obs["text"]
        with pytest.raises(ValueError, match="num_envs=2"):
            envs.step(["// only one\n"])


def test_an_error_reply_is_raised_after_every_reply_is_in(server):
    with Client(server.address, timeout_s=30) as client:
        envs = make_vec(TASK, 3, backend="null", client=client)
        envs.reset(seed=0)
        client.close_env(envs.env_ids[1])  # gone behind the vector env's back
        with pytest.raises(UnknownEnv):
            envs.step(["// x\n"] * 3)
        assert client.outstanding() == 0
        envs.close()  # the missing env is not an error here


def test_seeds_per_sub_env(server):
    with closing(make_vec(TASK, 3, backend="null", address=server.address)) as envs:
        _, infos = envs.reset(seed=10)
        assert infos["seed"].tolist() == [10, 11, 12]
        _, infos = envs.reset(seed=[5, None, 7])
        assert infos["seed"][0] == 5 and infos["seed"][2] == 7
        first = [envs.reset()[1]["seed"].tolist() for _ in range(2)]
        envs.reset(seed=[5, 11, 7])
        again = [envs.reset()[1]["seed"].tolist() for _ in range(2)]
        assert [s[0] for s in first] == [s[0] for s in again] and [s[2] for s in first] == [s[2] for s in again]
        with pytest.raises(ValueError, match="num_envs=3"):
            envs.reset(seed=[1, 2])


def test_gymnasium_make_vec_uses_the_vector_entry_point(server):
    envs = gymnasium.make_vec(ENV_ID, num_envs=2, task=TASK, backend="null", address=server.address)
    try:
        assert isinstance(envs, KernelGymVectorEnv)
        obs, _ = envs.reset(seed=1)
        assert obs["status"] == ("ok", "ok")
    finally:
        envs.close()
