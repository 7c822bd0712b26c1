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
    # Tracebacks nested in the message (interpret mode reports errors through a host callback):
    # their frame lines are jax's internals; the exception line after them is what matters.
    lines = [line for line in text.strip().splitlines()
             if line.strip() and not line.lstrip().startswith('File "') and "Traceback (most recent" not in line]
    out = "\n".join(lines[:limit])
    return out[:MAX_MESSAGE_CHARS]


def from_exception(error: BaseException, candidate_file: str, stage: str,
                   pallas_calls: list[tuple[str, int]] | None = None) -> list[dict]:
    """An error on the candidate line the innermost candidate frame was running (the call that
    failed), then a note for each other candidate line the message names (Mosaic names the kernel
    body's line). Line 0 when no line of the candidate could be found."""
    message = f"{type(error).__name__}: {error}".replace(candidate_file, "candidate.py")
    # The judge sees the candidate's file only as the tracer named it, in another folder.
    message = re.sub(r'[^\s"\'(]*/candidate\.py', "candidate.py", message)
    frames = [f.lineno or 0 for f in traceback.extract_tb(error.__traceback__) if f.filename == candidate_file]
    named = [int(m.group(1)) for m in re.finditer(r'candidate\.py"?[:(](\d+)', message)]
    line = frames[-1] if frames else 0
    if not line and pallas_calls:
        # Raised after tracing (Mosaic): the pallas_call whose kernel the message names, else the first.
        mentioned = [l for name, l in pallas_calls if name and f"pallas_call {name}" in message]
        line = (mentioned or [pallas_calls[0][1]])[0]
    if not line and named:
        line = named[0]
    out = [{"file": "candidate.py", "line": line, "column": 0, "severity": "error",
            "message": f"[{stage}] " + _first_lines(message)}]
    for other in dict.fromkeys(named):
        if other != line:
            out.append({"file": "candidate.py", "line": other, "column": 0, "severity": "note",
                        "message": "named in the error above"})
    return out


def from_findings(findings) -> list[dict]:
    return [{"file": "candidate.py", "line": f.line, "column": f.column, "severity": "error",
             "message": f.message} for f in findings]
