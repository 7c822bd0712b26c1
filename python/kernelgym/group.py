"""Group scoring: G candidate actions from one state, scored in one call (GRPO-style training).

A GRPO trainer samples G completions for one prompt and needs a reward for each. Stepping G envs
from G resets evaluates the same starter G times; stepping one env G times makes each candidate
start where the previous one left off. ``score`` forks the env once per candidate (a fork copies
the episode, nothing is evaluated), steps every fork with its candidate, all pipelined on the
env's connection, closes the forks, and leaves the env itself where it was. The starter was
evaluated once, at ``reset``; the G evaluations run as wide as the server's runners allow.

Identical candidates share one evaluation: the same action from the same state is stepped once
and its outcome given to every copy, and candidates whose actions differ but make the same kernel
(the same source digest) are given the first one's outcome. So identical kernels get identical
rewards, and a group of them zero advantages, whatever the machine's noise.

Measurement noise between different kernels is handled by ``ties``: with ``ties="interval"`` (the
default), correct candidates whose speedups' 95% intervals overlap are a tie, and each is paid the
mean of the tie's rewards, so that a GRPO group does not turn noise into advantage.
``ties="none"`` pays each candidate the server's reward as it is. ``Scored.server_reward`` keeps
the server's in both cases.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

from kernelgym.client import Client
from kernelgym.errors import ServerError, TransportError
from kernelgym.trust import timing_trust

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
    server_reward: float | None = None  # the server's reward for this step (``reward`` after ties)
    same_as: int | None = None  # the earlier candidate whose evaluation this one shares; None: its own
    tied_with: tuple[int, ...] = ()  # the candidates it ties with (``ties="interval"``), itself included
    trust: dict[str, Any] | None = None  # kernelgym.trust.timing_trust of its evaluation


Ties = Literal["interval", "none"]
TIES = ("interval", "none")


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
          timeout_s: float | None = None, ties: Ties = "interval") -> list[Scored]:
    """Scores each candidate (an action as ``env.step`` takes it: a source str, a wire-form dict,
    an action-space sample) from ``env``'s current state. See ``score_groups``."""
    return score_groups([(env, candidates)], group_relative=group_relative,
                        timeout_s=timeout_s, ties=ties)[0]


def score_groups(groups: Sequence[tuple[KernelGymEnv, Sequence[Any]]], *, group_relative: bool = False,
                 timeout_s: float | None = None, ties: Ties = "interval") -> list[list[Scored]]:
    """Scores many prompts' groups at once: for each (env, candidates), a fork of ``env`` per
    candidate, stepped with it; every fork, step and close of every group pipelined on the envs'
    connection (all envs must share one ``Client``), so a batch of B prompts x G candidates keeps
    the server's runners busy. Returns, per group, a ``Scored`` per candidate, in order. The envs
    themselves are not stepped. Identical candidates share an evaluation and ``ties`` decides how
    overlapping intervals are paid (the module's doc).

    Raises ValueError/TypeError for a malformed candidate before anything is sent, the
    ServerError of a fork or step the server refused (after closing the forks already made), and
    TransportError when replies stop coming for ``timeout_s`` (default: the client's timeout).
    """
    if ties not in TIES:
        raise ValueError(f"score_groups: ties must be one of {TIES}, not {ties!r}")
    if not groups:
        return []
    client = groups[0][0].client
    if not isinstance(client, Client) or any(env.client is not client for env, _ in groups):
        raise ValueError("score_groups: every env must use one kernelgym.Client (make them with client=...)")
    if client.outstanding():
        raise ValueError("score_groups: receive the replies to your own send() calls first")
    wires = [[env.spaces.wire_action(c) for c in candidates] for env, candidates in groups]
    # The same action from the same state makes the same kernel: step one copy of each.
    firsts = [_first_of_each(row) for row in wires]
    wait_s = client.timeout_s if timeout_s is None else timeout_s

    forks: dict[tuple[int, int], str] = {}
    results: dict[tuple[int, int], dict[str, Any]] = {}
    failure: ServerError | None = None
    pending: dict[int, tuple[str, tuple[int, int]]] = {}
    for g, (env, _) in enumerate(groups):
        parent = env.env_id
        if parent is None:
            raise ValueError("score_groups: an env was closed")
        for i in sorted(set(firsts[g])):
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
    for g in range(len(groups)):
        row = _shared([results[(g, firsts[g][i])] for i in range(len(wires[g]))], firsts[g])
        if ties == "interval":
            row = _tie_overlapping(row)
        if group_relative:
            advantages = group_relative_advantages([s.reward for s in row])
            row = [replace(s, advantage=a) for s, a in zip(row, advantages)]
        scored.append(row)
    return scored


def _first_of_each(wires: Sequence[dict[str, Any]]) -> list[int]:
    """For each action, the index of its first equal one in the list (itself when it is the first)."""
    seen: dict[str, int] = {}
    return [seen.setdefault(json.dumps(w, sort_keys=True, default=str), i) for i, w in enumerate(wires)]


def _source_digest(observation: dict[str, Any]) -> str:
    return hashlib.sha256(str(observation.get("source", "")).encode()).hexdigest()


def _shared(results: Sequence[dict[str, Any]], firsts: Sequence[int]) -> list[Scored]:
    """One Scored per candidate from its step's result; a candidate whose kernel (source digest)
    an earlier one made takes that one's outcome, so identical kernels are paid identically. An
    invalid action made no kernel (its source is the unchanged one, its message its own): it
    shares only with copies of the same action."""
    row: list[Scored] = []
    by_kernel: dict[str, int] = {}
    for i, (result, first) in enumerate(zip(results, firsts)):
        o = result["observation"]
        invalid = str(o["status"]) == "invalid_action"
        owner = i if invalid else by_kernel.setdefault(_source_digest(o), i)
        same_as = first if first != i else (owner if owner != i else None)
        if same_as is not None:
            row.append(replace(row[same_as], same_as=same_as if row[same_as].same_as is None else row[same_as].same_as,
                               tied_with=()))
            continue
        reward = float(result["reward"])
        row.append(Scored(reward=reward, status=str(o["status"]), speedup=float(o["speedup"]), text=str(o["text"]),
                          observation=o, server_reward=reward, trust=timing_trust(o.get("report"))))
    return row


def _interval(s: Scored) -> tuple[float, float] | None:
    low, high = float(s.observation.get("speedup_ci_low", 0)), float(s.observation.get("speedup_ci_high", 0))
    if s.status != "ok" or s.speedup <= 0 or not 0 < low <= high:
        return None
    return low, high


def _tie_overlapping(row: list[Scored]) -> list[Scored]:
    """Correct candidates whose 95% speedup intervals overlap, paid alike: walking them from the
    slowest up, a tie takes each next candidate whose interval overlaps every member's (so a
    chain of small overlaps does not tie the slowest with the fastest), and each member is paid
    the tie's mean reward. Ties are contiguous in speed, so a faster tie is never paid less than
    a slower one under a reward that grows with speed. Failures and untimed results keep theirs."""
    timed = sorted((i for i, s in enumerate(row) if _interval(s) is not None), key=lambda i: row[i].speedup)
    out = list(row)
    tie: list[int] = []
    for i in timed + [-1]:
        if i >= 0 and tie and _interval(row[i])[0] <= min(_interval(row[j])[1] for j in tie):  # type: ignore[index]
            tie.append(i)
            continue
        if len(tie) > 1:
            mean = sum(row[j].reward for j in tie) / len(tie)
            members = tuple(sorted(tie))
            for j in tie:
                out[j] = replace(row[j], reward=mean, tied_with=members)
        tie = [i]
    return out


def _close(client: Client, envs: Any, wait_s: float) -> None:
    """Closes the forks, pipelined; one already gone is not an error here."""
    ids = {client.send("env.close", env=env) for env in envs}
    deadline = time.monotonic() + wait_s
    while ids:
        reply = client.recv(timeout_s=max(0.0, deadline - time.monotonic()))
        if reply is None:
            return
        ids.discard(reply.id)
