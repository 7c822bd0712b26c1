"""Group scoring: G candidate actions from one state, scored in one call (GRPO-style training).

A GRPO trainer samples G completions for one prompt and needs a reward for each. Stepping G envs
from G resets evaluates the same starter G times; stepping one env G times makes each candidate
start where the previous one left off. ``score`` forks the env once per candidate (a fork copies
the episode, nothing is evaluated), steps every fork with its candidate, all pipelined on the
env's connection, closes the forks, and leaves the env itself where it was. The starter was
evaluated once, at ``reset``; the G evaluations run as wide as the server's runners allow.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from kernelgym.client import Client
from kernelgym.errors import ServerError, TransportError

if TYPE_CHECKING:
    from kernelgym.env import KernelGymEnv


@dataclass(frozen=True)
class Scored:
    """One candidate's outcome: what a trainer needs, and what the model would read next."""

    reward: float
    status: str  # "ok", "compile_error", "incorrect", ..., "invalid_action"
    speedup: float  # over the reference; 0 unless correct and timed
    text: str  # the observation text (the next user turn of a chat policy)
    observation: dict[str, Any]  # the wire observation, whole
    advantage: float | None = None  # group-relative, when asked for: (reward - mean) / std


def group_relative_advantages(rewards: Sequence[float]) -> list[float]:
    """GRPO's advantage: each reward less the group's mean, over the group's standard deviation
    (population); all 0 when the rewards are equal (no signal, and no division by 0)."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if std < 1e-12:
        return [0.0] * len(rewards)
    return [(r - mean) / std for r in rewards]


def score(env: KernelGymEnv, candidates: Sequence[Any], *, group_relative: bool = False,
          timeout_s: float | None = None) -> list[Scored]:
    """Scores each candidate (an action as ``env.step`` takes it: a source str, a wire-form dict,
    an action-space sample) from ``env``'s current state. See ``score_groups``."""
    return score_groups([(env, candidates)], group_relative=group_relative,
                        timeout_s=timeout_s)[0]


def score_groups(groups: Sequence[tuple[KernelGymEnv, Sequence[Any]]], *, group_relative: bool = False,
                 timeout_s: float | None = None) -> list[list[Scored]]:
    """Scores many prompts' groups at once: for each (env, candidates), a fork of ``env`` per
    candidate, stepped with it; every fork, step and close of every group pipelined on the envs'
    connection (all envs must share one ``Client``), so a batch of B prompts x G candidates keeps
    the server's runners busy. Returns, per group, a ``Scored`` per candidate, in order. The envs
    themselves are not stepped.

    Raises ValueError/TypeError for a malformed candidate before anything is sent, the
    ServerError of a fork or step the server refused (after closing the forks already made), and
    TransportError when replies stop coming for ``timeout_s`` (default: the client's timeout).
    """
    if not groups:
        return []
    client = groups[0][0].client
    if not isinstance(client, Client) or any(env.client is not client for env, _ in groups):
        raise ValueError("score_groups: every env must use one kernelgym.Client (make them with client=...)")
    if client.outstanding():
        raise ValueError("score_groups: receive the replies to your own send() calls first")
    wires = [[env.spaces.wire_action(c) for c in candidates] for env, candidates in groups]
    wait_s = client.timeout_s if timeout_s is None else timeout_s

    forks: dict[tuple[int, int], str] = {}
    results: dict[tuple[int, int], dict[str, Any]] = {}
    failure: ServerError | None = None
    pending: dict[int, tuple[str, tuple[int, int]]] = {}
    for g, (env, _) in enumerate(groups):
        parent = env.env_id
        if parent is None:
            raise ValueError("score_groups: an env was closed")
        for i in range(len(wires[g])):
            pending[client.send("env.fork", env=parent)] = ("fork", (g, i))
    try:
        while pending:
            deadline = time.monotonic() + wait_s
            reply = client.recv(timeout_s=max(0.0, deadline - time.monotonic()))
            if reply is None:
                raise TransportError(f"score_groups: no reply within {wait_s:g} s ({len(pending)} outstanding)")
            kind, (g, i) = pending.pop(reply.id)
            if not reply.ok:
                assert reply.error is not None
                failure = failure or reply.error
                continue
            if kind == "fork":
                forks[(g, i)] = reply.unwrap()["env"]
                if failure is None:  # once something failed, no more evaluations are started
                    pending[client.send("env.step", env=forks[(g, i)], action=wires[g][i], meta={})] = ("step", (g, i))
            else:
                results[(g, i)] = reply.unwrap()
    finally:
        _close(client, forks.values(), wait_s)
    if failure is not None:
        raise failure

    scored: list[list[Scored]] = []
    for g, (env, _) in enumerate(groups):
        row = []
        for i in range(len(wires[g])):
            result = results[(g, i)]
            o = result["observation"]
            row.append(Scored(reward=float(result["reward"]), status=str(o["status"]), speedup=float(o["speedup"]),
                              text=str(o["text"]), observation=o))
        if group_relative:
            advantages = group_relative_advantages([s.reward for s in row])
            row = [Scored(s.reward, s.status, s.speedup, s.text, s.observation, a) for s, a in zip(row, advantages)]
        scored.append(row)
    return scored


def _close(client: Client, envs: Any, wait_s: float) -> None:
    """Closes the forks, pipelined; one already gone is not an error here."""
    ids = {client.send("env.close", env=env) for env in envs}
    deadline = time.monotonic() + wait_s
    while ids:
        reply = client.recv(timeout_s=max(0.0, deadline - time.monotonic()))
        if reply is None:
            return
        ids.discard(reply.id)
