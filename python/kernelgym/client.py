"""The Python client of ``kernelgym serve`` (docs/protocol.md), mirroring the C++ one
(env/client/client.h): the same calls, the same matching of replies, the same retries.

``Client`` (sync, one thread at a time):

- calls: ``hello()``, ``list_tasks()``, ``get_task()``, ``make()``, ``reset()``, ``step()``,
  ``fork()``, ``close_env()``, ``stats()``, ``health()`` each send one request and wait for its
  reply; they return the result as the plain dict it is on the wire (docs/protocol.md,
  "Results") and raise the typed ``ServerError`` of an error reply (``UnknownEnv``,
  ``EpisodeOver``, ...).
- pipelining, EnvPool style: ``send(op, **fields)`` returns the request id at once, ``recv()``
  returns whichever reply arrives first (a ``Reply``; ``reply.unwrap()`` gives the result or raises
  its error). Replies are matched by id, so the two ways mix: a sync call made while sends are
  outstanding keeps the replies to them that arrive meanwhile for ``recv()``.

``AsyncClient`` (asyncio): the same calls as coroutines; any number of them may be awaited at once
on one client (``asyncio.gather``), one reader task per connection hands each reply to its caller.

Authentication (docs/security.md): ``server_key`` (the server's certificate file) and
``client_key`` (this client's key-pair file, from ``kernelgym keys generate``) make the
connection CURVE; without them, ``$KERNELGYM_SERVER_KEY`` and ``$KERNELGYM_CLIENT_KEY`` are used
when set. A refused handshake raises ``AuthError`` with the reason (``Client``; an
``AsyncClient`` sees a timeout).

No server: when nothing at the address has completed a ZeroMQ handshake ``connect_timeout_s`` (5 s)
after the first request, that request raises ``TransportError`` saying how to start a server —
rather than waiting ``timeout_s`` for a reply that cannot come. A server that is starting is waited
for that long; once one has answered, a later restart of it is waited for as long as ``timeout_s``.

Server restarts: the server's instance (random per server process) comes with hello, health,
env.make and env.fork (``client.server_instance``). When a reply names another instance than the
one seen before, every request sent before it and still waiting fails at once with
``ServerRestarted`` (its reply would never come). While requests wait, a reconnect of the socket
(the server went away and something answers again) sends one ``health`` probe to learn the
instance there, so a restart is noticed within the reconnect interval rather than at the
timeout (``Client``; an ``AsyncClient`` notices at its next hello, health, make or fork reply).
A request naming an env of the old process is answered ``ServerRestarted`` by the new one.

Timeouts and retries: a call waits ``timeout_s`` for its reply. When none comes, the idempotent
ops (hello, tasks.list, tasks.get, stats, health) are sent again on a fresh socket after an
exponential backoff with jitter (``backoff_initial_s`` doubling up to ``backoff_max_s``), up to
``retries`` more times; a reply to any attempt answers the call; then ``TransportError``. The
``env.*`` ops are never sent twice (a second env.step could apply an action twice): their timeout is a
``TransportError`` at once, and a reply that comes later is dropped. Sends are never retried;
``recv``'s timeout is the caller's. Between requests the socket reconnects by itself when the
server restarts (ZMQ_RECONNECT_IVL / _MAX from the backoff; linger 0, so closing never blocks).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import zmq
import zmq.asyncio
import zmq.auth
from zmq.utils.monitor import recv_monitor_message

from kernelgym import text
from kernelgym.errors import AuthError, ProtocolError, ServerRestarted, TransportError
from kernelgym.protocol import IDEMPOTENT_OPS, Reply, decode_reply, encode_request

DEFAULT_ADDRESS = "tcp://127.0.0.1:5555"


def _milliseconds(seconds: float) -> int:
    return int(min(max(math.ceil(seconds * 1000), 1), 2_000_000_000))


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g} s"


def _curve_keys(server_key: str | None, client_key: str | None) -> tuple[bytes, bytes, bytes] | None:
    """(server public, own public, own secret) from certificate files, the arguments' or else
    $KERNELGYM_SERVER_KEY / $KERNELGYM_CLIENT_KEY's; None when neither is given."""
    server_key = server_key or os.environ.get("KERNELGYM_SERVER_KEY") or None
    client_key = client_key or os.environ.get("KERNELGYM_CLIENT_KEY") or None
    if server_key is None and client_key is None:
        return None
    if server_key is None or client_key is None:
        raise TransportError("CURVE needs both the server's public key (server_key / $KERNELGYM_SERVER_KEY) and "
                             "this client's key pair (client_key / $KERNELGYM_CLIENT_KEY)")
    try:
        server_public, _ = zmq.auth.load_certificate(server_key)
        public, secret = zmq.auth.load_certificate(client_key)
    except (OSError, ValueError) as e:
        raise TransportError(f"cannot read a key file: {e}") from None
    if not secret:
        raise TransportError(f"{client_key} has no secret-key: a key pair (NAME.key from `kernelgym keys generate`) "
                             "is needed, not a public certificate")
    return server_public, public, secret


_HANDSHAKE_CHECK_MS = 250

# The handshake outcomes a monitor reports, and what each means for the caller.
_HANDSHAKE_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                     | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
# A ZMTP peer answered: something that speaks ZeroMQ is at the address.
_CONNECTED_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED


def _handshake_failure(event: dict[str, Any], address: str, curve: bool) -> str:
    if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return (f"{address} refused this client's key (ZAP status {event['value']}): its public key is not on the "
                "server's allow-list (docs/security.md)")
    if curve:
        return f"the CURVE handshake with {address} failed: is the server key right, and does the server use CURVE?"
    return (f"the handshake with {address} failed: the server probably requires CURVE: give server_key and "
            "client_key (or $KERNELGYM_SERVER_KEY and $KERNELGYM_CLIENT_KEY; docs/security.md)")


class _Options:
    """What Client and AsyncClient share: the options, their sockets' settings, the backoff."""

    def __init__(self, address: str, timeout_s: float, retries: int, backoff_initial_s: float, backoff_max_s: float,
                 server_key: str | None = None, client_key: str | None = None):
        self.address = address
        self._curve = _curve_keys(server_key, client_key)
        self.timeout_s = float(timeout_s)
        self.retries = max(0, int(retries))
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self._rng = random.Random()

    def _configure(self, socket: zmq.Socket, monitor: Callable[[zmq.Socket], None] | None = None) -> None:
        """Options, CURVE, then ``monitor(socket)`` (watching from before the connect, so that the
        first handshake is seen too), then the connect."""
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.RECONNECT_IVL, _milliseconds(self.backoff_initial_s))
        socket.setsockopt(zmq.RECONNECT_IVL_MAX, _milliseconds(max(self.backoff_max_s, self.backoff_initial_s)))
        socket.setsockopt(zmq.SNDTIMEO, _milliseconds(self.timeout_s))
        if self._curve is not None:
            socket.curve_serverkey, socket.curve_publickey, socket.curve_secretkey = self._curve
        if monitor is not None:
            monitor(socket)
        try:
            socket.connect(self.address)
        except zmq.ZMQError as e:
            socket.close()
            raise TransportError(f"cannot connect to '{self.address}': {e}") from None

    def _attempts(self, op: str) -> int:
        return 1 + self.retries if op in IDEMPOTENT_OPS else 1

    def _backoff(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (1, 2, ...): exponential, capped, with jitter."""
        base = min(self.backoff_max_s, self.backoff_initial_s * 2.0 ** (retry - 1))
        return base * self._rng.uniform(0.5, 1.0)

    def _no_reply(self, op: str, attempts: int) -> TransportError:
        within = f"no reply from {self.address} within {_format_seconds(self.timeout_s)}"
        if attempts > 1:
            return TransportError(f"{op}: {within} in each of {attempts} attempts")
        if op in IDEMPOTENT_OPS:
            return TransportError(f"{op}: {within}")
        return TransportError(f"{op}: {within} (not retried: {op} is not idempotent)")

    @staticmethod
    def _make_fields(
        task: str,
        backend: str,
        reward: str,
        reward_config: Mapping[str, Any] | None,
        max_steps: int,
        time_budget_s: float,
        record: bool,
    ) -> dict[str, Any]:
        return {
            "task": task,
            "backend": backend,
            "reward": reward,
            "reward_config": {} if reward_config is None else reward_config,
            "max_steps": max_steps,
            "time_budget_s": time_budget_s,
            "record": record,
        }


def _instance_of(reply: Reply) -> str | None:
    """The server instance a result names (hello, health, env.make, env.fork), else None."""
    if not reply.ok or type(reply.result) is not dict:
        return None
    instance = reply.result.get("instance")
    return instance if type(instance) is str and instance else None


def _restarted(op: str, address: str, before: str, now: str) -> ServerRestarted:
    effect = "" if op in IDEMPOTENT_OPS else ", and whether it took effect on the old server is unknown"
    return ServerRestarted(
        "SERVER_RESTARTED",
        f"{op}: the server at {address} restarted (instance {before} -> {now}) while this request was in flight: "
        f"its reply will never come{effect}",
        {"op": op, "instance": now, "previous_instance": before},
        op,
    )


def _tasks(reply: Reply) -> list[dict[str, Any]]:
    return reply.unwrap()["tasks"]


class Client(_Options):
    """One DEALER connection to a kernelgym server, used by one thread at a time.

    Connects lazily: nothing is sent until the first request, and a server that is not up yet is
    waited for (within the timeout). Raises TransportError for a malformed address.
    """

    # Invariants (as the C++ client's):
    #   - _connections[-1] is the current socket: every new request goes out on it. Older ones
    #     (left by a retry) stay open while a request sent on them is pending, so that their
    #     replies still arrive, and are closed when none is.
    #   - every id is in at most one of _pending (waiting for its reply), _abandoned (given up on:
    #     its reply is dropped), _sync_arrived / _ready (arrived, not yet handed out).
    #   - at most one sync call is in progress, so every sync entry of _pending and
    #     _sync_arrived belongs to it.

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        server_key: str | None = None,
        client_key: str | None = None,
        connect_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(address, timeout_s, retries, backoff_initial_s, backoff_max_s, server_key, client_key)
        self.connect_timeout_s = float(connect_timeout_s)
        self._connected = False  # a ZeroMQ handshake with the address completed, once
        self._waiting_since: float | None = None  # the first request sent while not connected
        self._context = zmq.Context()
        self._connections: list[zmq.Socket] = []
        self._monitors: dict[zmq.Socket, zmq.Socket] = {}  # each connection's handshake events
        self._pending: dict[int, tuple[str, zmq.Socket, bool]] = {}  # id -> (op, socket, sync)
        self._abandoned: dict[int, zmq.Socket] = {}
        self._sync_arrived: deque[Reply | ProtocolError] = deque()
        self._ready: deque[Reply | ProtocolError] = deque()
        self._async_outstanding = 0  # sends whose reply is not in _ready yet
        self._sync_in_progress = False
        self._next_id = 1  # 0 means "unknown" on the wire
        self.stray_replies = 0  # replies to no request of ours: non-zero means a server bug
        self.server_instance: str | None = None  # the server instance last seen in a reply
        self._probes: dict[int, zmq.Socket] = {}  # health requests sent after a reconnect
        self._handshakes: dict[zmq.Socket, int] = {}  # completed handshakes per connection
        try:
            self._open_connection()
        except BaseException:
            self._context.term()
            raise

    # ---- sync calls ----

    def hello(self) -> dict[str, Any]:
        """HelloResult: protocol, server, backends and their backend_info, rewards, action_kinds,
        feature_names, defaults. The backends' descriptors go to ``kernelgym.text``."""
        result = self._call("hello").unwrap()
        text.use_backend_info(result.get("backend_info", []))
        return result

    def list_tasks(self, suite: str = "") -> list[dict[str, Any]]:
        """The task summaries of ``suite`` (all when "")."""
        return _tasks(self._call("tasks.list", suite=suite))

    def get_task(self, task: str) -> dict[str, Any]:
        """What a policy may know about the task (``tasks.get``): its summary, sizes, tensors, tolerance,
        knobs, and ``versions``: per backend its starter_source, reference_source and build rules."""
        return self._call("tasks.get", task=task).unwrap()

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
        """A new env (EnvInfo: env, task, backend, reward, reward_min/max, max_steps, ...).
        0 limits mean the server's defaults."""
        fields = self._make_fields(task, backend, reward, reward_config, max_steps, time_budget_s, record)
        return self._call("env.make", **fields).unwrap()

    def reset(self, env: str, seed: int | None = None) -> dict[str, Any]:
        """Starts an episode: {observation, info}; ``seed`` None lets the server draw one."""
        return self._call("env.reset", env=env, seed=seed).unwrap()

    def step(self, env: str, action: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Applies an action (kernelgym.protocol.replace(...), edit(...), ...):
        {observation, reward, terminated, truncated, info}. ``meta`` (a map) is kept with the step
        in the trajectory store when the env records, e.g. the prompts and completions behind it."""
        return self._call("env.step", env=env, action=action, meta={} if meta is None else meta).unwrap()

    def fork(self, env: str) -> dict[str, Any]:
        """A copy of the env's episode under a new id (EnvInfo)."""
        return self._call("env.fork", env=env).unwrap()

    def close_env(self, env: str) -> None:
        self._call("env.close", env=env).unwrap()

    def stats(self) -> dict[str, Any]:
        """The server's counters (for operators; not a stable interface)."""
        return self._call("stats").unwrap()

    def health(self) -> dict[str, Any]:
        """HealthResult: status ("ok" or "draining"), uptime_s, sessions (open envs), runners
        (backend -> connected runners), queued and running evaluations. Answered while draining."""
        return self._call("health").unwrap()

    # ---- pipelining ----

    def send(self, op: str, **fields: Any) -> int:
        """Sends one request (``send("env.step", env=e, action=a)``) and returns its id, the id of
        its Reply. Never retried. Raises TransportError when it cannot even be queued within the
        timeout (the send buffer stayed full), TypeError / ValueError for a malformed request."""
        return self._send(op, fields, sync=False)

    def recv(self, timeout_s: float | None = None) -> Reply | None:
        """The next reply to a ``send()``, in arrival order: one that already arrived (also during a
        sync call) at once, else waits up to ``timeout_s`` (None: no limit). None when none came in
        time, and at once when no send is outstanding. An error reply is returned, not raised
        (``reply.unwrap()`` raises it); raises ProtocolError for a reply that cannot be read."""
        if not self._ready and self._async_outstanding > 0:
            deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
            self._pump(deadline, self._ready.__len__)
            self._close_idle()
        if not self._ready:
            return None
        item = self._ready.popleft()
        if isinstance(item, ProtocolError):
            raise item
        return item

    def outstanding(self) -> int:
        """Sends whose reply ``recv()`` has not returned yet."""
        return self._async_outstanding + len(self._ready)

    def close(self) -> None:
        """Closes the connection; outstanding requests are given up. Safe to call twice."""
        for socket in self._connections:
            self._close_socket(socket)
        self._connections.clear()
        self._pending.clear()
        self._abandoned.clear()
        self._async_outstanding = 0
        if not self._context.closed:
            self._context.term()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ----

    def _open_connection(self) -> None:
        socket = self._context.socket(zmq.DEALER)

        def watch(s: zmq.Socket) -> None:
            self._monitors[s] = s.get_monitor_socket(_HANDSHAKE_EVENTS | _CONNECTED_EVENTS)

        try:
            self._configure(socket, watch)
        except TransportError:
            monitor = self._monitors.pop(socket, None)
            if monitor is not None:
                monitor.close(linger=0)
            raise
        self._connections.append(socket)

    def _close_socket(self, socket: zmq.Socket) -> None:
        monitor = self._monitors.pop(socket, None)
        if monitor is not None:
            socket.disable_monitor()
            monitor.close(linger=0)
        socket.close(linger=0)

    def _check_handshakes(self) -> None:
        """Raises AuthError when a connection's handshake was refused, TransportError when no server
        has answered within connect_timeout_s: checked whenever a poll comes back empty, so either
        is reported within a poll slice, not after the timeout."""
        for socket, monitor in list(self._monitors.items()):
            while monitor.poll(0):
                event = recv_monitor_message(monitor)
                if event["event"] & _HANDSHAKE_EVENTS:
                    raise AuthError(_handshake_failure(event, self.address, self._curve is not None))
                if event["event"] & _CONNECTED_EVENTS:
                    self._connected = True
                    self._handshakes[socket] = self._handshakes.get(socket, 0) + 1
                    if self._handshakes[socket] > 1:
                        self._probe(socket)
        if (not self._connected and self._waiting_since is not None
                and time.monotonic() - self._waiting_since > self.connect_timeout_s):
            raise TransportError(
                f"no kernelgym server at {self.address}: nothing there answered within "
                f"{_format_seconds(self.connect_timeout_s)}. Start one with `kernelgym serve` (it binds "
                f"{DEFAULT_ADDRESS} by default; `kernelgym serve --help`), or give the address of a running one "
                "(connect_timeout_s waits longer for a server that is starting)")

    def _probe(self, socket: zmq.Socket) -> None:
        """The connection came back after a break: the server may be another process now, whose
        replies to the old requests will never come. One ``health`` request (answered at once by
        whichever server is there) tells its instance; only while requests wait on ``socket``."""
        waiting = any(s is socket for _, s, _ in self._pending.values())
        if not waiting or any(s is socket for s in self._probes.values()):
            return
        request_id = self._next_id
        self._next_id += 1
        try:
            socket.send(encode_request(request_id, "health"), zmq.NOBLOCK)
        except zmq.ZMQError:
            return  # no probe: the requests wait for their timeout as before
        self._probes[request_id] = socket

    def _note_instance(self, reply: Reply) -> None:
        """A reply naming another server instance than the one seen before: every request sent
        before the one it answers, still waiting, went to a server process that is gone and fails
        now with ServerRestarted."""
        seen = _instance_of(reply)
        if seen is None:
            return
        before, self.server_instance = self.server_instance, seen
        if before is None or before == seen:
            return
        for request_id in sorted(i for i in self._pending if i < reply.id):
            op, socket, sync = self._pending.pop(request_id)
            self._abandoned[request_id] = socket  # should its reply come after all, it is dropped
            error = _restarted(op, self.address, before, seen)
            self._deliver(sync, Reply(request_id, False, None, error, op))

    def _send(self, op: str, fields: dict[str, Any], sync: bool) -> int:
        if not self._connections:
            raise TransportError(f"{op}: the client is closed")
        request_id = self._next_id
        data = encode_request(request_id, op, **fields)
        self._next_id += 1
        socket = self._connections[-1]
        try:
            socket.send(data, copy=len(data) < 65536)
        except zmq.Again:
            raise TransportError(
                f"{op}: could not queue the request for {self.address} within "
                f"{_format_seconds(self.timeout_s)} (send buffer full)"
            ) from None
        except zmq.ZMQError as e:
            raise TransportError(f"{op}: sending to {self.address} failed: {e}") from None
        self._pending[request_id] = (op, socket, sync)
        if not self._connected and self._waiting_since is None:
            self._waiting_since = time.monotonic()
        if not sync:
            self._async_outstanding += 1
        return request_id

    def _pump(self, deadline: float | None, done: Callable[[], Any]) -> None:
        """Reads replies until ``done()`` or ``deadline`` (None: as long as it takes); polls at
        least once, so a deadline already past still picks up what is waiting."""
        while not done():
            if deadline is None:
                timeout_ms = None
            else:
                left = deadline - time.monotonic()
                timeout_ms = max(0, math.ceil(left * 1000))
            # Polled in slices, so that a refused handshake (no reply will ever come) is noticed.
            slice_ms = _HANDSHAKE_CHECK_MS if timeout_ms is None else min(timeout_ms, _HANDSHAKE_CHECK_MS)
            if len(self._connections) == 1:
                socket = self._connections[0]
                arrived = bool(socket.poll(slice_ms, zmq.POLLIN))
                if arrived:
                    self._drain(socket)
            else:
                poller = zmq.Poller()
                for socket in self._connections:
                    poller.register(socket, zmq.POLLIN)
                ready = poller.poll(slice_ms)
                arrived = bool(ready)
                for socket, _ in ready:
                    self._drain(socket)
            if not arrived:
                self._check_handshakes()
            if timeout_ms == 0:
                return

    def _drain(self, socket: zmq.Socket) -> None:
        # A reply proves that a server answered, whether or not its handshake event was read yet
        # (a busy client reads its monitor only when a poll comes back empty).
        self._connected = True
        while socket.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            data = socket.recv(zmq.NOBLOCK)
            if not socket.getsockopt(zmq.RCVMORE):
                self._dispatch(data)
                continue
            # A reply is one message part; read the rest of a multi-part one and refuse it.
            while socket.getsockopt(zmq.RCVMORE):
                socket.recv(zmq.NOBLOCK)
            self._deliver(None, ProtocolError("a reply in several message parts (the protocol sends one)"))

    def _dispatch(self, data: bytes) -> None:
        try:
            reply: Reply | None = decode_reply(data)
            problem: ProtocolError | None = None
            reply_id = reply.id  # type: ignore[union-attr]
        except ProtocolError as e:
            reply, problem, reply_id = None, e, e.id
        if reply_id in self._probes:
            del self._probes[reply_id]
            if reply is not None:
                self._note_instance(reply)
            return
        pending = self._pending.pop(reply_id, None) if reply_id else None
        if pending is None:
            if reply_id and self._abandoned.pop(reply_id, None) is not None:
                return  # a late reply nobody waits for
            if reply is not None:
                self.stray_replies += 1
                return
            # Malformed and not attributable: whoever is waiting hears of it.
            self._deliver(None, ProtocolError(f"{problem} (from {self.address})"))
            return
        op, _, sync = pending
        if problem is not None:
            self._deliver(sync, ProtocolError(f"{op} {problem}", reply_id))
            return
        assert reply is not None
        self._note_instance(reply)
        reply.op = op
        if reply.error is not None:
            reply.error.op = op
        self._deliver(sync, reply)

    def _deliver(self, sync: bool | None, item: Reply | ProtocolError) -> None:
        """``sync``: how the id was sent; None when the reply's request is unknown: then it goes to
        the sync call in progress, if any, else to recv()."""
        if sync or (sync is None and self._sync_in_progress):
            self._sync_arrived.append(item)
            return
        if sync is False:
            self._async_outstanding -= 1
        self._ready.append(item)

    def _abandon(self, request_id: int) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return
        self._abandoned[request_id] = pending[1]
        if not pending[2]:
            self._async_outstanding -= 1

    def _close_idle(self) -> None:
        """Closes the retired sockets nothing is pending on; their abandoned ids can no longer be
        answered, so they are forgotten too."""
        if len(self._connections) <= 1:
            return
        busy = {id(socket) for _, socket, _ in self._pending.values()}
        for socket in self._connections[:-1]:
            if id(socket) in busy:
                continue
            self._abandoned = {i: s for i, s in self._abandoned.items() if s is not socket}
            self._probes = {i: s for i, s in self._probes.items() if s is not socket}
            self._handshakes.pop(socket, None)
            self._close_socket(socket)
            self._connections.remove(socket)

    def _call(self, op: str, **fields: Any) -> Reply:
        attempts = self._attempts(op)
        ids: list[int] = []
        arrived = self._sync_arrived.__len__
        self._sync_in_progress = True
        try:
            for attempt in range(attempts):
                if attempt > 0:
                    # An earlier attempt may still answer during the backoff.
                    self._pump(time.monotonic() + self._backoff(attempt), arrived)
                    if arrived():
                        break
                    self._open_connection()
                ids.append(self._send(op, fields, sync=True))
                self._pump(time.monotonic() + self.timeout_s, arrived)
                if arrived():
                    break
            if not arrived():
                raise self._no_reply(op, attempts)
            item = self._sync_arrived[0]
            if isinstance(item, ProtocolError):
                raise item
            if not item.op:
                item.op = op
            return item
        finally:
            # Whatever way the call ends, its other attempts are given up on.
            for request_id in ids:
                self._abandon(request_id)
            self._sync_arrived.clear()
            self._sync_in_progress = False
            self._close_idle()


class _AsyncConnection:
    def __init__(self, socket: zmq.asyncio.Socket) -> None:
        self.socket = socket
        self.reader: asyncio.Task[None] | None = None


class AsyncClient(_Options):
    """The same calls as ``Client``, as coroutines, for one asyncio event loop. Any number of calls
    may be in flight at once; a reader task per connection hands each reply to its caller by id.

    Use ``async with AsyncClient(...) as c:`` or ``await c.close()``.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        server_key: str | None = None,
        client_key: str | None = None,
    ) -> None:
        super().__init__(address, timeout_s, retries, backoff_initial_s, backoff_max_s, server_key, client_key)
        self._context = zmq.asyncio.Context()
        # The socket is made at the first call, inside the event loop its reader runs on.
        self._connections: list[_AsyncConnection] = []
        # id -> (op, the call's answer, the connection it went out on). All attempts of one call
        # share its answer: a reply to any of them answers it.
        self._waiting: dict[int, tuple[str, asyncio.Future[Reply], _AsyncConnection]] = {}
        self._abandoned: dict[int, _AsyncConnection] = {}
        self._next_id = 1
        self._closed = False
        self.stray_replies = 0
        self.server_instance: str | None = None  # the server instance last seen in a reply

    async def hello(self) -> dict[str, Any]:
        result = (await self._call("hello")).unwrap()
        text.use_backend_info(result.get("backend_info", []))
        return result

    async def list_tasks(self, suite: str = "") -> list[dict[str, Any]]:
        return _tasks(await self._call("tasks.list", suite=suite))

    async def get_task(self, task: str) -> dict[str, Any]:
        return (await self._call("tasks.get", task=task)).unwrap()

    async def make(
        self,
        task: str,
        backend: str = "cpu",
        reward: str = "log_speedup_gain",
        reward_config: Mapping[str, Any] | None = None,
        max_steps: int = 0,
        time_budget_s: float = 0.0,
        record: bool = False,
    ) -> dict[str, Any]:
        fields = self._make_fields(task, backend, reward, reward_config, max_steps, time_budget_s, record)
        return (await self._call("env.make", **fields)).unwrap()

    async def reset(self, env: str, seed: int | None = None) -> dict[str, Any]:
        return (await self._call("env.reset", env=env, seed=seed)).unwrap()

    async def step(self, env: str, action: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return (await self._call("env.step", env=env, action=action, meta={} if meta is None else meta)).unwrap()

    async def fork(self, env: str) -> dict[str, Any]:
        return (await self._call("env.fork", env=env)).unwrap()

    async def close_env(self, env: str) -> None:
        (await self._call("env.close", env=env)).unwrap()

    async def stats(self) -> dict[str, Any]:
        return (await self._call("stats")).unwrap()

    async def health(self) -> dict[str, Any]:
        return (await self._call("health")).unwrap()

    def outstanding(self) -> int:
        """Calls waiting for their reply."""
        return len({id(answer) for _, answer, _ in self._waiting.values()})

    async def close(self) -> None:
        """Closes the connections; calls still waiting raise TransportError. Safe to call twice."""
        self._closed = True
        for _, answer, _ in self._waiting.values():
            if not answer.done():
                answer.set_exception(TransportError(f"the client of {self.address} was closed"))
        self._waiting.clear()
        self._abandoned.clear()
        connections, self._connections = self._connections, []
        for connection in connections:
            await self._stop(connection)
        if not self._context.closed:
            self._context.term()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- internals ----

    def _open_connection(self) -> _AsyncConnection:
        socket = self._context.socket(zmq.DEALER)
        self._configure(socket)
        connection = _AsyncConnection(socket)
        connection.reader = asyncio.get_running_loop().create_task(self._read(connection))
        self._connections.append(connection)
        return connection

    @staticmethod
    async def _stop(connection: _AsyncConnection) -> None:
        if connection.reader is not None:
            connection.reader.cancel()
            try:
                await connection.reader
            except asyncio.CancelledError:
                pass
        connection.socket.close(linger=0)

    async def _read(self, connection: _AsyncConnection) -> None:
        socket = connection.socket
        try:
            while True:
                data = await socket.recv()
                if not socket.getsockopt(zmq.RCVMORE):
                    self._dispatch(connection, data)
                    continue
                while socket.getsockopt(zmq.RCVMORE):
                    await socket.recv()
                self._fail_oldest(
                    connection, ProtocolError("a reply in several message parts (the protocol sends one)")
                )
        except zmq.ZMQError:
            return  # the socket or the context was closed

    def _dispatch(self, connection: _AsyncConnection, data: bytes) -> None:
        try:
            reply = decode_reply(data)
        except ProtocolError as problem:
            waiting = self._waiting.pop(problem.id, None) if problem.id else None
            if waiting is not None:
                op, answer, _ = waiting
                if not answer.done():
                    answer.set_exception(ProtocolError(f"{op} {problem}", problem.id))
            elif not (problem.id and self._abandoned.pop(problem.id, None) is not None):
                self._fail_oldest(connection, ProtocolError(f"{problem} (from {self.address})"))
            return
        self._note_instance(reply)
        waiting = self._waiting.pop(reply.id, None)
        if waiting is None:
            if self._abandoned.pop(reply.id, None) is None:
                self.stray_replies += 1
            return
        op, answer, _ = waiting
        reply.op = op
        if reply.error is not None:
            reply.error.op = op
        if not answer.done():
            answer.set_result(reply)

    def _note_instance(self, reply: Reply) -> None:
        """As Client._note_instance: calls waiting on requests sent before this reply's request
        fail with ServerRestarted when it names another server instance."""
        seen = _instance_of(reply)
        if seen is None:
            return
        before, self.server_instance = self.server_instance, seen
        if before is None or before == seen:
            return
        for request_id in sorted(i for i in self._waiting if i < reply.id):
            op, answer, connection = self._waiting.pop(request_id)
            self._abandoned[request_id] = connection
            if not answer.done():
                answer.set_result(Reply(request_id, False, None, _restarted(op, self.address, before, seen), op))

    def _fail_oldest(self, connection: _AsyncConnection, problem: ProtocolError) -> None:
        """A reply that cannot be attributed: the oldest call waiting on its connection hears of
        it (as the C++ client hands it to whoever waits)."""
        ids = [i for i, (_, _, c) in self._waiting.items() if c is connection]
        if not ids:
            self.stray_replies += 1
            return
        _, answer, _ = self._waiting.pop(min(ids))
        if not answer.done():
            answer.set_exception(problem)

    async def _send(self, op: str, fields: dict[str, Any], answer: asyncio.Future[Reply]) -> int:
        if self._closed:
            raise TransportError(f"{op}: the client is closed")
        request_id = self._next_id
        data = encode_request(request_id, op, **fields)
        self._next_id += 1
        connection = self._connections[-1] if self._connections else self._open_connection()
        # Registered before sending: a send that has to wait for buffer space completes inside
        # the event loop, which may read the reply first.
        self._waiting[request_id] = (op, answer, connection)
        try:
            await connection.socket.send(data)
        except zmq.Again:
            self._waiting.pop(request_id, None)
            raise TransportError(
                f"{op}: could not queue the request for {self.address} within "
                f"{_format_seconds(self.timeout_s)} (send buffer full)"
            ) from None
        except zmq.ZMQError as e:
            self._waiting.pop(request_id, None)
            raise TransportError(f"{op}: sending to {self.address} failed: {e}") from None
        return request_id

    async def _call(self, op: str, **fields: Any) -> Reply:
        attempts = self._attempts(op)
        answer: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        ids: list[int] = []
        try:
            for attempt in range(attempts):
                if attempt > 0:
                    await asyncio.wait((answer,), timeout=self._backoff(attempt))
                    if answer.done():
                        break
                    self._open_connection()
                ids.append(await self._send(op, fields, answer))
                await asyncio.wait((answer,), timeout=self.timeout_s)
                if answer.done():
                    break
            if not answer.done():
                raise self._no_reply(op, attempts)
            return answer.result()
        finally:
            for request_id in ids:
                waiting = self._waiting.pop(request_id, None)
                if waiting is not None:
                    self._abandoned[request_id] = waiting[2]
            await self._close_idle()

    async def _close_idle(self) -> None:
        if len(self._connections) <= 1:
            return
        busy = {id(connection) for _, _, connection in self._waiting.values()}
        for connection in self._connections[:-1]:
            if id(connection) in busy:
                continue
            self._connections.remove(connection)
            self._abandoned = {i: c for i, c in self._abandoned.items() if c is not connection}
            await self._stop(connection)
