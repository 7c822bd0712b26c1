"""`kernelgym collect` writes a dataset that pandas reads: one row per distinct kernel, with the
columns docs/dataset.md lists, and a card whose counts are the rows."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
from conftest import server_binary


def test_a_collected_dataset_loads_in_pandas(tmp_path):
    out = tmp_path / "dataset"
    run = subprocess.run(
        [str(server_binary()), "collect", "--policy", "random-knobs", "--suite", "cpu", "--task", "cpu/silu_mul",
         "--max-evaluations", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    df = pd.read_json(out / "transitions.jsonl", lines=True)
    card = json.loads((out / "card.json").read_text())
    assert len(df) == card["counts"]["distinct_kernels"] > 0
    assert {"task", "step", "action_kind", "status", "speedup", "reward", "source"} <= set(df.columns)
    assert (df["task"] == "cpu/silu_mul").all()
    assert not df["source"].duplicated().any()
    assert card["counts"]["transitions"] == len(df) + card["counts"]["duplicate_kernels_left_out"]
    report = json.loads((out / "report.json").read_text())
    assert report["policy"] == "random-knobs" and len(report["outcomes"]) == 1
