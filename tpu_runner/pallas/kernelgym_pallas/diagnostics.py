"""Turning what JAX, Pallas and Mosaic raise into diagnostics on lines of the candidate.

Three places carry the candidate's line: Python tracebacks (errors while tracing: shapes, block
specs, unsupported ops found by the Pallas lowering), MLIR locations inside Mosaic's messages
(`candidate.py":12:8`), and the 'at <file>:<line>' notes some lowering errors add. All are read;
the message keeps its first lines (the deepest, most specific part of a long Mosaic report is
usually first).
"""
from __future__ import annotations

import re
import traceback

MAX_MESSAGE_CHARS = 2000


def _first_lines(text: str, limit: int = 12) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    out = "\n".join(lines[:limit])
    return out[:MAX_MESSAGE_CHARS]


def from_exception(error: BaseException, candidate_file: str, stage: str) -> list[dict]:
    """At least one diagnostic; line 0 when no line of the candidate could be found."""
    message = f"{type(error).__name__}: {error}"
    lines: list[int] = []
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == candidate_file:
            lines.append(frame.lineno or 0)
    name = re.escape(candidate_file.rsplit("/", 1)[-1])
    for match in re.finditer(name + r'"?[:(](\d+)', message):
        lines.append(int(match.group(1)))
    line = lines[-1] if lines else 0  # the innermost candidate frame is where it went wrong
    return [{"file": "candidate.py", "line": line, "column": 0, "severity": "error",
             "message": f"[{stage}] " + _first_lines(message)}]


def from_findings(findings) -> list[dict]:
    return [{"file": "candidate.py", "line": f.line, "column": f.column, "severity": "error",
             "message": f.message} for f in findings]
