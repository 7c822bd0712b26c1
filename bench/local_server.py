"""A `kernelgym serve` for the benchmark scripts: one local runner on a free loopback port,
stopped (SIGTERM) when the `with` block ends. Standard library only."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def served(binary: str, directory: Path, runners: int = 1, *flags: str) -> Iterator[str]:
    """Yields the clients' endpoint; raises RuntimeError when the server does not come up.
    ``flags`` go to `kernelgym serve` as they are (e.g. "--null-backend")."""
    endpoint_file = directory / "endpoints.json"
    endpoint_file.unlink(missing_ok=True)
    server = subprocess.Popen([binary, "serve", "--bind", "tcp://127.0.0.1:*", "--local-runners", str(runners),
                               "--endpoint-file", str(endpoint_file), *flags],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not endpoint_file.exists():
            if server.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        yield json.loads(endpoint_file.read_text())["clients"]
    finally:
        server.terminate()
        server.wait()
