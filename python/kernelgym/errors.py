"""What the kernelgym client raises (docs/protocol.md, "Error codes"; env/client/errors.h).

Three kinds, because a caller reacts to each differently:

``ServerError``
    The server answered with an error reply: the request was read and refused, and sending it
    again unchanged gets the same answer (except ``Overloaded``, whose ``retry_after_s`` says
    when to try again). One subclass per wire error code, named after it in CamelCase
    (``UNKNOWN_ENV`` -> ``UnknownEnv``); ``ERRORS_BY_CODE`` maps the code to the class.
``TransportError``
    No answer: the server is unreachable or did not reply within the timeout (after the retries,
    for the ops that are retried). Whether a non-idempotent request (``env.*``) took effect is
    unknown.
``ProtocolError``
    An answer that is not a valid reply, or whose result lacks a field of the op's format (a
    server bug, or a server speaking another protocol version).

All derive from ``KernelGymError``. Bad arguments (an unknown action kind, a field of the wrong
type) are the caller's bug and raise ``TypeError`` / ``ValueError`` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping


class KernelGymError(Exception):
    """Base of every error the client raises for the server's or the transport's sake."""


class TransportError(KernelGymError):
    """No reply in time, or the server cannot be reached."""


class AuthError(TransportError):
    """The server refused the connection's handshake: a CURVE key not on its allow-list, or CURVE
    on one side only (docs/security.md). The message says which."""


class ProtocolError(KernelGymError):
    """A reply that cannot be read, or whose result does not have the op's format.

    ``id`` is the request the bad reply answers, 0 when it could not be told.
    """

    def __init__(self, message: str, id: int = 0) -> None:  # the wire's name for it
        super().__init__(message)
        self.id = id


class ServerError(KernelGymError):
    """An error reply. ``code`` is the wire code, ``details`` the reply's string map.

    ``op`` names the request's op when the client knows it (it reads "<op>: <CODE>: <message>").
    """

    code: str = ""

    def __init__(self, code: str, message: str, details: Mapping[str, str] | None = None, op: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.details: dict[str, str] = dict(details or {})
        self.op = op

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        return f"{self.op}: {text}" if self.op else text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r}, op={self.op!r})"


# One class per code of env/protocol/messages.cc, in its order (tests/test_errors.py checks that
# the two lists are the same).


class BadRequest(ServerError):
    """Malformed bytes, wrong types, missing or unknown fields, too large; details['op'] names the op."""

    code = "BAD_REQUEST"


class UnsupportedVersion(ServerError):
    """``v`` is not a protocol version the server speaks."""

    code = "UNSUPPORTED_VERSION"


class UnknownOp(ServerError):
    code = "UNKNOWN_OP"


class UnknownEnv(ServerError):
    """No such env: never made, closed, or reaped after ``--idle-timeout``."""

    code = "UNKNOWN_ENV"


class UnknownTask(ServerError):
    code = "UNKNOWN_TASK"


class UnknownReward(ServerError):
    code = "UNKNOWN_REWARD"


class UnknownBackend(ServerError):
    code = "UNKNOWN_BACKEND"


class InvalidAction(ServerError):
    """An action that cannot be applied (inside ``env.step`` it is an observation instead)."""

    code = "INVALID_ACTION"


class EnvBusy(ServerError):
    """The env already has a reset or step in flight: one request per env at a time."""

    code = "ENV_BUSY"


class EpisodeOver(ServerError):
    """``env.step`` before the first reset, or after the episode ended: call reset."""

    code = "EPISODE_OVER"


class NoRunner(ServerError):
    code = "NO_RUNNER"


class RunnerLost(ServerError):
    code = "RUNNER_LOST"


class Overloaded(ServerError):
    """Queues are full (or the server is stopping); retry after ``retry_after_s``."""

    code = "OVERLOADED"

    @property
    def retry_after_s(self) -> float | None:
        """``details['retry_after_s']`` as seconds; None when absent or not a number."""
        try:
            return float(self.details["retry_after_s"])
        except (KeyError, ValueError):
            return None


class Internal(ServerError):
    """A bug on the server's side, reported instead of crashing."""

    code = "INTERNAL"


class ServerRestarted(ServerError):
    """The server restarted: the request named an env of its earlier process (envs do not outlive
    their server), or the client saw the server's instance change while the request was in flight,
    so its reply will never come. Whether an ``env.*`` request took effect on the old process is
    unknown. ``details['instance']`` is the new instance, ``details.get('previous_instance')`` the
    old one when the client saw it."""

    code = "SERVER_RESTARTED"


ERRORS_BY_CODE: dict[str, type[ServerError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        UnsupportedVersion,
        UnknownOp,
        UnknownEnv,
        UnknownTask,
        UnknownReward,
        UnknownBackend,
        InvalidAction,
        EnvBusy,
        EpisodeOver,
        NoRunner,
        RunnerLost,
        Overloaded,
        Internal,
        ServerRestarted,
    )
}

ERROR_CODES: tuple[str, ...] = tuple(ERRORS_BY_CODE)


def server_error(code: str, message: str, details: Mapping[str, str] | None = None, op: str = "") -> ServerError:
    """The typed exception for an error reply (ServerError itself for a code this client lacks)."""
    return ERRORS_BY_CODE.get(code, ServerError)(code, message, details, op)
