"""The line protocol both processes speak with the C++ runner: JSON objects, one per line, on two
inherited descriptors (or stdin/stdout when run by hand). Whatever candidate code prints goes to
stderr, never onto the protocol stream."""
from __future__ import annotations

import json
import os
import sys

_channels = {"in": sys.stdin, "out": sys.__stdout__}


def open_channels(control_fd: int | None, report_fd: int | None) -> None:
    if control_fd is not None:
        _channels["in"] = os.fdopen(control_fd, "r")
    if report_fd is not None:
        _channels["out"] = os.fdopen(report_fd, "w")
    sys.stdout = sys.stderr


def send(message: dict) -> None:
    _channels["out"].write(json.dumps(message) + "\n")
    _channels["out"].flush()


def receive() -> dict | None:
    line = _channels["in"].readline()
    return json.loads(line) if line else None


def add_arguments(parser) -> None:
    parser.add_argument("--no-seccomp", action="store_true", help="for debugging only")
    parser.add_argument("--control-fd", type=int, help="read the runner's messages here instead of stdin")
    parser.add_argument("--report-fd", type=int, help="write events here instead of stdout")
