"""Fixtures that start the real ``kernelgym serve`` binary ($KERNELGYM_BIN, else
<repo>/build/cli/kernelgym), bound to tcp://127.0.0.1:* with its endpoints read from
--endpoint-file, its log in <dir>/server.log, stopped with SIGTERM at the end.

``server``        one per test session: ``--local-runners 0 --null-backend`` (the null backend
                  answers every evaluation at once: fast protocol tests). Shared, so a test makes
                  its own envs and never assumes the server's counters start at 0.
``start_server``  a factory, ``start_server(*flags)``: another server for one test, with the
                  given flags after the common ones (bind, runner-bind, endpoint-file,
                  record-dir). Say ``--local-runners 0`` unless the test wants the default one
                  local runner. Stopped when the test ends.
``fixtures_dir``  tests/fixtures/protocol, the golden protocol messages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 90.0  # longer than the server's default --drain-timeout (60 s)


def server_binary() -> Path:
    binary = Path(os.environ.get("KERNELGYM_BIN") or REPO / "build" / "cli" / "kernelgym")
    if not binary.is_file():
        pytest.fail(f"no kernelgym binary at {binary}: build it (scripts/build.sh) or set KERNELGYM_BIN")
    return binary


@dataclass
class Server:
    """A running ``kernelgym serve``."""

    address: str  # clients' endpoint, e.g. tcp://127.0.0.1:41234
    runners_address: str  # runners' endpoint (kernelgym runner --connect)
    dir: Path  # holds endpoints.json, server.log, store/ (--record-dir)
    pid: int
    process: subprocess.Popen = field(repr=False)

    @property
    def log(self) -> Path:
        return self.dir / "server.log"

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then its exit code (SIGKILL, and -9, when it does not exit in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def launch(directory: Path, *flags: str, bind: str = "tcp://127.0.0.1:*",
           runner_bind: str = "tcp://127.0.0.1:*") -> Server:
    """A server in ``directory``; ``bind`` / ``runner_bind`` name its endpoints (a server restarted
    on another's endpoints: ``bind=old.address, runner_bind=old.runners_address``)."""
    directory.mkdir(parents=True, exist_ok=True)
    endpoint_file = directory / "endpoints.json"
    argv = [
        str(server_binary()),
        "serve",
        "--bind", bind,
        "--runner-bind", runner_bind,
        "--endpoint-file", str(endpoint_file),
        "--record-dir", str(directory / "store"),
        *flags,
    ]  # fmt: skip
    with open(directory / "server.log", "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    # The server writes the file atomically (rename) once both sockets are bound: wait for it.
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not endpoint_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            log_text = (directory / "server.log").read_text(errors="replace")
            pytest.fail(f"the server did not start ({' '.join(argv)}):\n{log_text}")
        time.sleep(0.01)
    endpoints = json.loads(endpoint_file.read_text())
    return Server(endpoints["clients"], endpoints["runners"], directory, process.pid, process)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = launch(tmp_path_factory.mktemp("server"), "--local-runners", "0", "--null-backend")
    yield s
    code = s.stop()
    assert code == 0, f"the server exited with {code}:\n{s.log_text()}"


@pytest.fixture
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(*flags: str) -> Server:
        s = launch(tmp_path_factory.mktemp("server"), *flags)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return REPO / "tests" / "fixtures" / "protocol"
