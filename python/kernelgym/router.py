"""Session routing across several ``kernelgym serve`` processes, on the client's side.

``Router([a, b, ...])`` has the calls of ``Client`` that an episode needs (``hello``,
``list_tasks``, ``get_task``, ``make``, ``reset``, ``step``, ``fork``, ``close_env``, ``health``)
and can stand in for one wherever a ``Client`` is taken (``kernelgym.make(..., client=router)``;
``kernelgym.make(..., address=[a, b])`` makes one):

- ``make`` places the new env on one server: the one with the fewest open sessions by its
  ``health`` answer (docs/protocol.md) plus the envs this router placed there since, a server
  whose status is not ``ok`` (draining) left out; round robin when a server cannot answer
  ``health`` (an older server: UNKNOWN_OP). A server that does not answer (``TransportError``)
  or whose queues are full (``Overloaded``) is skipped and the next one is tried, so new envs
  fail over to the servers that are up. A server that did not answer is left out for
  ``down_retry_s`` before it is asked again.
- the router remembers which server owns each env and sends every later call for it there
  (``fork`` places the copy on its parent's server). An env whose server has died is not moved:
  its episode lived in that server. Its calls raise what ``Client`` raises: ``TransportError``
  when the server does not answer within ``timeout_s``, ``UnknownEnv`` when a restarted server
  no longer knows it. An env id the router did not make raises ``UnknownEnv`` without a request.

Health answers are cached for ``health_ttl_s``, so placing many envs costs at most one
``health`` per server per ``health_ttl_s``. A ``make`` that timed out may still have made its env
on the slow server; nobody will use it, and that server reaps it after its ``--idle-timeout``.

One router is used by one thread at a time, like ``Client`` (give each thread, process or Ray
actor its own; python -m kernelgym.examples.ray_rollouts).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kernelgym.client import Client
from kernelgym.errors import KernelGymError, Overloaded, TransportError, UnknownEnv, UnknownOp

__all__ = ["Router", "ServerState"]

T = TypeVar("T")


@dataclass
class ServerState:
    """What the router knows about one server (``Router.servers``)."""

    address: str
    status: str = "unknown"  # health's status; "unreachable" after a TransportError, "no health" after UNKNOWN_OP
    sessions: int | None = None  # health's sessions at the last answer, None when unknown
    placed: int = 0  # envs this router made (minus those it closed) there since that answer
    checked_at: float = float("-inf")  # time.monotonic() of the last health call
    down_until: float = float("-inf")  # left out of placement until then
    owned: int = 0  # envs of this router living there now

    @property
    def load(self) -> int | None:
        return None if self.sessions is None else self.sessions + self.placed


class Router:
    """Places envs on several servers and routes each env's calls to its server (module doc).

    ``timeout_s``, ``retries``, ``backoff_initial_s`` and ``backoff_max_s`` are each server's
    ``Client``'s; ``health_timeout_s`` bounds one ``health`` call (one attempt, so that a dead
    server delays a placement by at most that much). CURVE (docs/security.md): ``client_key`` is
    this client's key pair, ``server_key`` the servers' public key file, or a map from address to
    each server's own; unset, the ``Client`` default ($KERNELGYM_SERVER_KEY, $KERNELGYM_CLIENT_KEY).
    A server that refuses the handshake (``AuthError``) is skipped like one that does not answer.
    """

    def __init__(
        self,
        addresses: Sequence[str],
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        health_timeout_s: float = 2.0,
        health_ttl_s: float = 1.0,
        down_retry_s: float = 10.0,
        server_key: str | Mapping[str, str] | None = None,
        client_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(addresses, str):
            addresses = [addresses]
        addresses = list(dict.fromkeys(addresses))  # each server once, in the given order
        if not addresses:
            raise ValueError("Router needs at least one server address")
        self.health_ttl_s = float(health_ttl_s)
        self.down_retry_s = float(down_retry_s)
        self._clock = clock
        self.servers: dict[str, ServerState] = {a: ServerState(a) for a in addresses}
        self._clients: dict[str, Client] = {}
        self._probes: dict[str, Client] = {}
        try:
            for a in addresses:
                key = server_key.get(a) if isinstance(server_key, Mapping) else server_key
                self._clients[a] = Client(a, timeout_s, retries, backoff_initial_s, backoff_max_s, key, client_key)
                self._probes[a] = Client(a, health_timeout_s, 0, backoff_initial_s, backoff_max_s, key, client_key)
        except BaseException:
            self.close()
            raise
        self._owner: dict[str, str] = {}  # env id -> server address
        # Round robin's position (and the tie-break between equally loaded servers), from a random
        # start: many routers (one per actor) do not all pile onto the first server.
        self._turn = itertools.count(random.randrange(len(addresses)))

    # ---- where things are ----

    @property
    def addresses(self) -> list[str]:
        return list(self.servers)

    @property
    def address(self) -> list[str]:
        """The servers (what ``kernelgym.make``'s spec records as its ``address``)."""
        return self.addresses

    def address_of(self, env: str) -> str:
        """The server that owns ``env``; UnknownEnv when this router did not make it."""
        try:
            return self._owner[env]
        except KeyError:
            raise UnknownEnv(
                "UNKNOWN_ENV", f"env '{env}' was not made through this router (or was closed)", {"env": env}
            ) from None

    def client_for(self, env: str) -> Client:
        """The connection to ``env``'s server."""
        return self._clients[self.address_of(env)]

    def envs(self) -> dict[str, str]:
        """env id -> server address, for every env this router holds."""
        return dict(self._owner)

    # ---- placement ----

    def health(self) -> dict[str, dict[str, Any] | KernelGymError]:
        """Every server's health answer now (or what its call raised), by address."""
        out: dict[str, dict[str, Any] | KernelGymError] = {}
        for address in self.servers:
            try:
                out[address] = self._refresh(address)
            except KernelGymError as e:
                out[address] = e
        return out

    def placement(self) -> list[str]:
        """The servers a new env would be tried on, best first (asks ``health`` where stale)."""
        now = self._clock()
        up = []
        for address, s in self.servers.items():
            if now < s.down_until:
                continue
            if now - s.checked_at >= self.health_ttl_s:
                try:
                    self._refresh(address)
                except KernelGymError:
                    pass  # _refresh recorded it
            if s.status in ("ok", "no health"):
                up.append(s)
        if not up:
            # Everything is down or draining: try whatever might answer rather than nothing.
            up = [s for s in self.servers.values() if s.status != "draining"] or list(self.servers.values())
        turn = next(self._turn)
        n = len(self.servers)
        rotation = {a: (i - turn) % n for i, a in enumerate(self.servers)}
        if all(s.load is not None for s in up):
            up.sort(key=lambda s: (s.load, rotation[s.address]))
        else:
            up.sort(key=lambda s: rotation[s.address])
        return [s.address for s in up]

    def _refresh(self, address: str) -> dict[str, Any]:
        s = self.servers[address]
        s.checked_at = self._clock()
        try:
            health = self._probes[address].health()
        except UnknownOp:
            s.status, s.sessions, s.placed = "no health", None, 0
            raise
        except TransportError:
            s.status, s.sessions, s.placed = "unreachable", None, 0
            s.down_until = s.checked_at + self.down_retry_s
            raise
        s.status, s.sessions, s.placed = str(health["status"]), int(health["sessions"]), 0
        s.down_until = float("-inf")
        return health

    def _mark_down(self, address: str) -> None:
        s = self.servers[address]
        s.status, s.sessions, s.placed = "unreachable", None, 0
        s.checked_at = self._clock()
        s.down_until = s.checked_at + self.down_retry_s

    def _place(self, call: Callable[[Client], T]) -> tuple[str, T]:
        """Runs ``call`` on the best server that takes it: skips servers that do not answer or are
        overloaded; any other error reply would be the same everywhere and is raised."""
        failures: list[str] = []
        last: KernelGymError | None = None
        for address in self.placement():
            try:
                return address, call(self._clients[address])
            except TransportError as e:
                self._mark_down(address)
                failures.append(f"{address}: {e}")
                last = e
            except Overloaded as e:
                failures.append(f"{address}: {e}")
                last = e
        if isinstance(last, Overloaded):
            raise last
        raise TransportError("no server took the env: " + ("; ".join(failures) or "no servers"))

    def _own(self, address: str, info: dict[str, Any]) -> dict[str, Any]:
        self._owner[info["env"]] = address
        s = self.servers[address]
        s.placed += 1
        s.owned += 1
        return info

    # ---- the Client calls ----

    def hello(self) -> dict[str, Any]:
        """The hello of the first server that answers (all serve the same protocol)."""
        return self._place(lambda c: c.hello())[1]

    def list_tasks(self, suite: str = "") -> list[dict[str, Any]]:
        return self._place(lambda c: c.list_tasks(suite))[1]

    def get_task(self, task: str) -> dict[str, Any]:
        return self._place(lambda c: c.get_task(task))[1]

    def make(
        self,
        task: str,
        backend: str = "cpu",
        reward: str = "log_speedup_gain",
        reward_config: Mapping[str, Any] | None = None,
        max_steps: int = 0,
        time_budget_s: float = 0.0,
        record: bool = False,
    ) -> dict[str, Any]:
        """A new env on the best server (EnvInfo, as ``Client.make``); ``address_of(env)`` says which."""
        address, info = self._place(
            lambda c: c.make(task, backend, reward, reward_config, max_steps, time_budget_s, record)
        )
        return self._own(address, info)

    def reset(self, env: str, seed: int | None = None) -> dict[str, Any]:
        return self.client_for(env).reset(env, seed=seed)

    def step(self, env: str, action: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.client_for(env).step(env, action, meta)

    def fork(self, env: str) -> dict[str, Any]:
        """A copy of the episode on the same server (a fork shares its parent's history)."""
        address = self.address_of(env)
        return self._own(address, self._clients[address].fork(env))

    def close_env(self, env: str) -> None:
        """Closes the env on its server and forgets it (also when that raises)."""
        address = self.address_of(env)
        try:
            self._clients[address].close_env(env)
        finally:
            del self._owner[env]
            self.servers[address].owned -= 1
            self.servers[address].placed -= 1  # the server's count dropped since its last health

    def close(self) -> None:
        """Closes every connection (the envs stay on their servers until closed or reaped)."""
        for client in [*self._clients.values(), *self._probes.values()]:
            client.close()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
