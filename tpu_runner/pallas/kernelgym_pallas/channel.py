"""The line channel both processes speak with the C++ runner: protocol.py's messages, one per line,
on two inherited descriptors (or stdin/stdout when run by hand). Whatever candidate code prints
goes to stderr, never onto the protocol stream."""
from __future__ import annotations

import os
import sys

from . import protocol

_channels = {"in": sys.stdin, "out": sys.__stdout__}


def open_channels(control_fd: int | None, report_fd: int | None) -> None:
    if control_fd is not None:
        _channels["in"] = os.fdopen(control_fd, "r")
    if report_fd is not None:
        _channels["out"] = os.fdopen(report_fd, "w")
    sys.stdout = sys.stderr


def send(message) -> None:
    _channels["out"].write(protocol.encode(message) + "\n")
    _channels["out"].flush()


def receive():
    """The runner's next message (protocol.ProtocolError when it is not one), None at the end."""
    line = _channels["in"].readline()
    return protocol.decode(line) if line else None


def add_arguments(parser) -> None:
    parser.add_argument("--no-seccomp", action="store_true", help="for debugging only")
    parser.add_argument("--control-fd", type=int, help="read the runner's messages here instead of stdin")
    parser.add_argument("--report-fd", type=int, help="write events here instead of stdout")
