"""CURVE from Python (docs/security.md): a real ``kernelgym serve`` with a key and a client
allow-list; the Python client with the allowed key pair, a stranger's, and none."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import zmq.auth

import kernelgym
from conftest import server_binary


def generate(directory: Path, name: str) -> Path:
    subprocess.run([str(server_binary()), "keys", "generate", "--out", str(directory / name)], check=True,
                   capture_output=True)
    return directory / name


@pytest.fixture
def curve_server(tmp_path: Path, start_server):
    keys = tmp_path / "keys"
    (keys / "allowed").mkdir(parents=True)
    for name in ("server", "alice", "stranger"):
        generate(keys, name)
    (keys / "allowed" / "alice.pub").write_bytes((keys / "alice.pub").read_bytes())
    server = start_server("--local-runners", "0", "--null-backend", "--server-key", str(keys / "server.key"),
                          "--allow-clients", str(keys / "allowed"))
    return server, keys


def test_our_key_files_are_zeromq_certificates_pyzmq_reads(tmp_path: Path) -> None:
    stem = generate(tmp_path, "k")
    public, secret = zmq.auth.load_certificate(str(stem) + ".key")
    assert len(public) == 40 and len(secret) == 40
    assert zmq.auth.load_certificate(str(stem) + ".pub") == (public, None)


def test_an_allowed_key_plays_and_others_get_a_clear_auth_error(curve_server, monkeypatch) -> None:
    server, keys = curve_server
    monkeypatch.delenv("KERNELGYM_SERVER_KEY", raising=False)
    monkeypatch.delenv("KERNELGYM_CLIENT_KEY", raising=False)
    with kernelgym.Client(server.address, timeout_s=30, server_key=str(keys / "server.pub"),
                          client_key=str(keys / "alice.key")) as alice:
        env = alice.make("cpu/softmax_rows", backend="null")["env"]
        alice.reset(env, seed=1)
        assert alice.step(env, {"kind": "submit"})["terminated"]
        before = alice.stats()["requests"]

    for options in ({"server_key": str(keys / "server.pub"), "client_key": str(keys / "stranger.key")}, {}):
        start = time.monotonic()
        with pytest.raises(kernelgym.AuthError) as refused:
            with kernelgym.Client(server.address, timeout_s=30, retries=0, **options) as client:
                client.hello()
        assert time.monotonic() - start < 10, "refused at once, not after the timeout"
        assert ("allow-list" if options else "requires CURVE") in str(refused.value)

    # The environment variables configure a client the same way.
    monkeypatch.setenv("KERNELGYM_SERVER_KEY", str(keys / "server.pub"))
    monkeypatch.setenv("KERNELGYM_CLIENT_KEY", str(keys / "alice.key"))
    with kernelgym.Client(server.address, timeout_s=30) as alice:
        after = alice.stats()["requests"]
    assert after.get("hello", 0) == before.get("hello", 0), "the refused clients' hellos never reached the server"
    monkeypatch.setenv("KERNELGYM_CLIENT_KEY", str(keys / "alice.pub"))
    with pytest.raises(kernelgym.TransportError, match="key pair"):
        kernelgym.Client(server.address)
