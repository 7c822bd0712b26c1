"""python -m kernelgym.examples.ray_rollouts without Ray: the same workers and Router, run in this process
against two real servers (null backend). Ray itself is never imported here."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from types import ModuleType

from kernelgym import Client
from test_examples import EXAMPLES, PYTHON_DIR

NULL = ["--local-runners", "0", "--null-backend"]


def load_example() -> ModuleType:
    # Registered in sys.modules before it runs: its dataclass resolves annotations through it.
    spec = importlib.util.spec_from_file_location("kernelgym_example_ray_rollouts", EXAMPLES / "ray_rollouts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_rollouts_spread_over_both_servers_and_close_their_envs(start_server):
    a, b = start_server(*NULL), start_server(*NULL)
    example = load_example()
    results = example.run_local([a.address, b.address], "cpu/softmax_rows", "null", 3, list(range(10)), workers=3)
    assert sorted(r["seed"] for r in results) == list(range(10))
    assert Counter(r["worker"] for r in results) == {0: 4, 1: 3, 2: 3}
    per_server = Counter(r["server"] for r in results)
    assert set(per_server) == {a.address, b.address}  # episodes one after another: they alternate
    assert all(r["steps"] == 3 for r in results)  # knobs actions until max_steps truncates
    for s in (a, b):
        with Client(s.address, timeout_s=10) as c:
            assert c.health()["sessions"] == 0


def test_the_script_runs_without_ray(start_server):
    a, b = start_server(*NULL), start_server(*NULL)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH", "")) if p)
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "ray_rollouts.py"), "--no-ray", "--address", a.address, "--address", b.address,
         "--backend", "null", "--episodes", "6", "--steps", "2", "--actors", "2"],
        check=False, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum(line.startswith("episode seed ") for line in lines) == 6
    assert lines[-1].startswith("6 episodes, mean return ")
    assert {line.split()[-1] for line in lines if "episode(s) on" in line} == {a.address, b.address}
