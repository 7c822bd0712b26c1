#!/usr/bin/env python3
"""Every Pallas task's reference estimate (what a candidate's speedup is divided into), beside two
floors no program can beat, to find references the estimator overprices or cannot price.

    build/pallas-venv/bin/python bench/reference_estimates.py [--task SUITE/NAME ...] [--target v5e]
        [--out bench/reference_estimates.json] [--jobs 1] [--timeout-s 1200]
    build/pallas-venv/bin/python bench/reference_estimates.py --table [--out FILE]   # the table only

The estimate is the judge's own: each task in a child process that does what a judge does before
its job (judge.prepare: the deviceless environment, libtpu's schedule dump in its own folder;
evaluation.warm_up: the target) and then evaluation._estimates, the function the judge calls for
the reference (the full sizes, the reference at HIGHEST precision, trusted_code=True). The
tpu_estimate.Estimate it builds is kept on the way (the reasons, the kernels, the XLA model's part),
which the protocol's ReferenceEstimate leaves out.

The floors come from the task's full shapes and the reference's jaxpr, at the chip's public peaks
(tpu_target.TARGETS: v5e 197e12 bf16 FLOP/s and 819e9 B/s HBM, v6e 918e12 and 1640e9):
  * hbm: the bytes of the inputs and outputs, each read or written once, at the HBM bandwidth;
  * mxu: 2 x output elements x contraction of every dot_general, ragged dot and convolution (a scan's body
    times its length; a while loop's body once, said in the row), at the bf16 MXU peak. At HIGHEST
    precision a float32 contraction is six bf16 passes on the chip; the floor does not count them.
A reference estimated above FLAG_RATIO x the larger floor, or not trusted, is flagged; one below
the larger floor too (priced cheaper than the chip's peaks allow: candidates are paid less).

Rows are kept in --out with a content key (the task's files, the kernelgym_pallas package, the
target): a rerun estimates only the tasks whose key changed, so the run can be stopped and resumed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tpu_runner" / "pallas" / "kernelgym_pallas"
FLAG_RATIO = 20.0


# ---- the child: one task, as the judge does it -------------------------------------------------

def _walk_floors(jaxpr, trips: float, out: dict) -> None:
    """FLOPs of the contractions of a jaxpr (a scan's body times its length)."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("dot_general", "ragged_dot_general"):
            # a ragged (grouped) dot: each row meets one group's matrix, as a dot of its shapes
            numbers = eqn.params["dimension_numbers"] if name == "dot_general" else \
                eqn.params["ragged_dot_dimension_numbers"].dot_dimension_numbers
            (contract, _), _ = numbers
            k = 1
            for d in contract:
                k *= int(eqn.invars[0].aval.shape[d])
            elements = 1
            for d in eqn.outvars[0].aval.shape:
                elements *= int(d)
            out["flops"] += trips * 2.0 * elements * k
        elif name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape
            out_feature_dim = eqn.params["dimension_numbers"].rhs_spec[0]
            per_output = 1
            for i, d in enumerate(rhs):
                if i != out_feature_dim:
                    per_output *= int(d)  # input features / groups x the window
            elements = 1
            for d in eqn.outvars[0].aval.shape:
                elements *= int(d)
            out["flops"] += trips * 2.0 * elements * per_output
        inner = trips
        if name == "scan":
            inner = trips * int(eqn.params.get("length", 1))
        elif name == "while":
            out["notes"].add("a while loop's body counted once")
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                sub = getattr(item, "jaxpr", None) if hasattr(item, "consts") else (item if hasattr(item, "eqns") else None)
                if sub is not None:
                    _walk_floors(sub, inner, out)


def child(task_dir: pathlib.Path, target_name: str) -> dict:
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="kernelgym-reference-estimate-"))
    os.chdir(scratch)  # the judge's job folder: libtpu's dump goes to tpu_scratch under it
    try:
        return _estimate_in(task_dir, target_name)
    finally:
        os.chdir("/")
        shutil.rmtree(scratch, ignore_errors=True)


def _estimate_in(task_dir: pathlib.Path, target_name: str) -> dict:
    sys.path.insert(0, str(PACKAGE.parent))
    from kernelgym_pallas import judge
    prepared = judge.prepare(target_name)
    from kernelgym_pallas import evaluation, task_spec, tpu_estimate, tpu_target
    target = evaluation.warm_up(prepared["target"])
    import jax
    import numpy as np

    task = task_spec.load_task(task_dir, "kernelgym")
    full = task.size_sets["full"]
    row = {"sizes": full.sizes}

    closed = jax.make_jaxpr(evaluation.exact_reference(task.reference()))(
        *[jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in full.inputs])
    floors = {"flops": 0.0, "notes": set()}
    _walk_floors(closed.jaxpr, 1.0, floors)
    io_bytes = sum(float(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in full.inputs)
    io_bytes += sum(float(np.prod(v.aval.shape)) * v.aval.dtype.itemsize for v in closed.jaxpr.outvars)
    _, _, peak_flops, peak_bytes = tpu_target.TARGETS[target_name]
    row.update(io_bytes=io_bytes, dot_flops=floors["flops"], floor_notes=sorted(floors["notes"]),
               hbm_floor_us=io_bytes / peak_bytes * 1e6, mxu_floor_us=floors["flops"] / peak_flops * 1e6)

    # The judge's call, with the estimator's full answer kept on the way.
    kept = []
    inner = tpu_estimate.estimate

    def keeping(*args, **kwargs):
        kept.append(inner(*args, **kwargs))
        return kept[-1]

    tpu_estimate.estimate = keeping
    started = time.perf_counter()
    estimate = evaluation._estimates(task, target, full.inputs, prepared["dump_dir"])
    row["estimate_seconds"] = time.perf_counter() - started
    row.update(estimated_us=estimate.estimated_us, xla_model_us=estimate.xla_model_us, trusted=estimate.trusted,
               xla_flops=estimate.flops, xla_bytes_accessed=estimate.bytes_accessed, error=estimate.error)
    if kept:
        e = kept[-1]
        row.update(reasons=list(e.reasons), mosaic_us=e.mosaic_seconds * 1e6, xla_us=e.xla_seconds * 1e6,
                   xla_floor_us=e.xla_floor_seconds * 1e6, xla_llo_cycles=e.xla_llo_cycles,
                   xla_excess_bytes=getattr(e, "xla_excess_bytes", 0.0),
                   kernels=[k.as_json() for k in e.kernels])
    return row


# ---- the parent: every task, cached by content --------------------------------------------------

def _digest(paths) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def content_key(task_dir: pathlib.Path, target: str) -> str:
    package = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    task = [p for p in task_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return hashlib.sha256(f"{target}\0{_digest(package)}\0{_digest(task)}".encode()).hexdigest()


def tasks() -> list[pathlib.Path]:
    return sorted(p.parent for p in (REPO / "datasets" / "suites").glob("*/*/pallas") if p.is_dir())


def run_one(task_dir: pathlib.Path, target: str, timeout: float) -> dict:
    started = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--child", str(task_dir),
                              "--target", target], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no estimate in {timeout:.0f} s", "wall_seconds": time.perf_counter() - started}
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        return {"error": f"child exited {run.returncode}: {run.stderr.strip()[-400:]}",
                "wall_seconds": time.perf_counter() - started}
    row = json.loads(lines[-1])
    row["wall_seconds"] = time.perf_counter() - started
    return row


def judged(row: dict) -> dict:
    """The floors' larger, the ratio and the flag."""
    floor = max(row.get("hbm_floor_us", 0.0), row.get("mxu_floor_us", 0.0))
    estimate = row.get("estimated_us", 0.0) or 0.0
    ratio = estimate / floor if floor > 0 and estimate > 0 else None
    flags = []
    if not row.get("trusted"):
        flags.append("untrusted")
    if ratio is not None and ratio > FLAG_RATIO:
        flags.append(f"> {FLAG_RATIO:.0f}x floor")
    if ratio is not None and ratio < 1.0:
        flags.append("below a floor")  # cheaper than the chip's peaks allow: a candidate is paid less
    return dict(row, floor_us=floor, ratio=ratio, flags=flags)


def table(rows: dict) -> str:
    lines = ["| task | reference estimate | XLA model | XLA bytes beyond the ops' bound | trusted | HBM floor | MXU floor "
             "| estimate / floor | flag |",
             "|---|---|---|---|---|---|---|---|---|"]
    for task_id in sorted(rows):
        r = judged(rows[task_id])
        if "estimated_us" not in r:
            lines.append(f"| {task_id} | {r.get('error', 'not run').splitlines()[0][:80]} | | | | | | | |")
            continue
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        why = "; ".join(r.get("reasons") or ([r["error"].splitlines()[0]] if r.get("error") else []))[:160]
        excess = r.get("xla_excess_bytes")
        excess = "-" if excess is None else f"{excess / 1e9:.2f} GB" if excess else "0"
        lines.append(f"| {task_id} | {r['estimated_us']:.1f} us | {r['xla_model_us']:.1f} us | {excess} | "
                     f"{'yes' if r['trusted'] else 'no: ' + why} | {r['hbm_floor_us']:.1f} us | "
                     f"{r['mxu_floor_us']:.1f} us | {ratio} | {', '.join(r['flags'])} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", action="append", help="SUITE/NAME, repeatable (default: every Pallas task)")
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "reference_estimates.json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=1200.0)
    parser.add_argument("--force", action="store_true", help="estimate the chosen tasks even where cached")
    parser.add_argument("--table", action="store_true", help="print the table of --out, estimate nothing")
    parser.add_argument("--child", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child.resolve(), args.target)), flush=True)
        return 0

    saved = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows = saved.setdefault(args.target, {})
    if args.table:
        print(table(rows))
        return 0
    chosen = [t for t in tasks() if not args.task or f"{t.parent.name}/{t.name}" in args.task]
    todo = []
    for task_dir in chosen:
        task_id = f"{task_dir.parent.name}/{task_dir.name}"
        key = content_key(task_dir, args.target)
        if not args.force and rows.get(task_id, {}).get("key") == key and "estimated_us" in rows[task_id]:
            continue
        todo.append((task_id, task_dir, key))
    print(f"{len(chosen) - len(todo)} of {len(chosen)} tasks cached; estimating {len(todo)}", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, d, args.target, args.timeout_s): (t, k) for t, d, k in todo}
        for future in concurrent.futures.as_completed(futures):
            task_id, key = futures[future]
            rows[task_id] = dict(future.result(), key=key)
            r = judged(rows[task_id])
            print(f"{task_id}: {r.get('estimated_us', 0):.1f} us trusted={r.get('trusted')} "
                  f"floor {r.get('floor_us', 0):.1f} us flags={r.get('flags')} ({r.get('wall_seconds', 0):.0f} s)"
                  + (f" error={r['error'][:200]}" if r.get("error") else ""), file=sys.stderr, flush=True)
            args.out.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
