"""Reading and updating datasets/suites/measured.json, the per-task figures `kernelgym tasks` shows.

Shared by bench/task_table.py (reference time, starter speedup) and bench/knob_sweep.py (the
best knob combination). Each writes only its own fields of a task's entry and keeps the rest.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "datasets/suites/measured.json"


def machine() -> str:
    """A short description of this machine: CPU model, cores, OS."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} vCPU, {platform.system()} {platform.release()}; one core per evaluation"


def load() -> dict:
    if MEASURED.exists():
        return json.loads(MEASURED.read_text())
    return {"tasks": {}}


def update(entries: dict[str, dict], command: str) -> None:
    """Merges `entries` (task id -> fields) into the file and stamps machine, date and command
    (`command` is how to measure it again: "python3 bench/<script>.py ...")."""
    data = load()
    data["machine"] = machine()
    data["date"] = datetime.date.today().isoformat()
    # One command per script that writes here; `kernelgym tasks` shows them together. Where the
    # binary was taken from is this checkout's business, not the figures'.
    command = re.sub(r" --kernelgym \S+", "", command)
    commands = data.setdefault("commands", {})
    commands[command.split()[1]] = command
    data["command"] = "; ".join(commands[k] for k in sorted(commands))
    tasks = data.setdefault("tasks", {})
    for task_id, fields in entries.items():
        tasks.setdefault(task_id, {}).update(fields)
    data["tasks"] = dict(sorted(tasks.items()))
    MEASURED.write_text(json.dumps(data, indent=1) + "\n")
