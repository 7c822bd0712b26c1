#!/usr/bin/env python3
"""Calibration of the TPU time estimate against real TPU v6e measurements (issue [tpu-estimate]).

    build/pallas-venv/bin/python bench/tpu_estimate_calibration.py \
        [--jaxbench-dir ../shared/jaxbench] [--estimator-path FILE] [--only REGEX] [--limit N] \
        [--timeout-s 300] [--json out.json] [--markdown out.md]

Reads a JAXBench checkout at run time (nothing of it is copied into this project): its
benchmark/results.csv holds device-profiler medians measured on one TPU v6e chip for the 50
vanilla-JAX baselines and the 8 hand-tuned Pallas kernels (`optimized.py`), with their output
shapes. Each program is compiled here deviceless for v6e (the pallas backend's environment,
tpu_target.py), one subprocess per program, and its time is estimated three ways, side by side:

* xla: XLA's cost model, `compiled.cost_analysis()["optimal_seconds"]` (counts loop trip counts;
  sees nothing inside a Mosaic kernel);
* llo: the summed static LLO cycles libtpu writes per compiled HLO op with
  `--xla_jf_dump_static_llo_profile_to` (an op in a while loop is counted once; a cycle count,
  so its fitted scale is a time per cycle);
* combined: the estimator module (`tpu_estimate.estimate`, given by --estimator-path), which
  adds the Mosaic kernels' cycles to XLA's figure for the rest.

Only programs whose output shape (jax.eval_shape of the checkout's workload) equals the shape in
results.csv are compared. For the baselines: Spearman's rank correlation and the share within
1.5x / 2x of the measured median after ONE scale per method, fitted in log space as the median of
log(measured / estimate) (robust to the few blind-spot outliers; the least-squares fit on logs,
their mean, is reported beside it). For the Pallas kernels: estimated speedup (baseline estimate
/ kernel estimate, in which the scale cancels) against the measured one (baseline median /
kernel median): is the direction (faster or slower) reproduced, is it within 1.5x.

Bounded: each compile runs in its own process group with a time limit; libtpu's logs go (at
error level only) to a scratch folder whose size, with the profile dump, is watched while it
runs, as is the process's resident memory: over --timeout-s, --max-scratch-mb or --max-rss-mb
the process group is killed and the program reported as skipped (measured here: the static
profile dump of the 8192x8192x28672 GEMM baseline grew past 9 GB in under two minutes).
Results are cached per program in --cache-dir (keyed by the program's source, the estimator's
source, the target and the libtpu version), so a rerun only compiles what changed.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PALLAS_PKG = REPO / "tpu_runner" / "pallas"
TARGET = "v6e"            # what results.csv was measured on
METHODS = ("xla", "llo", "combined")
METHOD_TEXT = {
    "xla": "XLA cost model: cost_analysis()['optimal_seconds']",
    "llo": "static LLO cycles, summed over every compiled HLO op (fitted scale: seconds per cycle)",
    "combined": "tpu_estimate.estimate(): Mosaic kernels' LLO cycles (floored by HBM bytes) + XLA's optimal_seconds",
}
_PROFILE_SUFFIX = "_static_llo_profile.textproto"
_ESTIMATE_RE = re.compile(r'hlo_op_estimate\s*\{[^{}]*?hlo_op_name:\s*"([^"]*)"[^{}]*?estimated_cycles:\s*(\d+)', re.S)


# ---- the child: one program, one deviceless compile ---------------------------------------------

def child_main(args) -> int:
    """Runs in its own process with the environment set by the parent (deviceless v6e, bounded
    logs, the profile dump). Writes one JSON object to args.child_out."""
    out: dict = {"status": "error"}
    try:
        out = _child_measure(args)
    except BaseException as e:  # reported, never raised across the process boundary
        import traceback
        out = {"status": "error", "error": f"{type(e).__name__}: {str(e)[:400]}",
               "traceback": traceback.format_exc()[-1500:]}
    pathlib.Path(args.child_out).write_text(json.dumps(out))
    return 0


def _load_module(path: pathlib.Path, name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _child_measure(args) -> dict:
    sys.path.insert(0, str(PALLAS_PKG))
    import jax
    import jax.numpy as jnp
    from kernelgym_pallas import tpu_target
    estimator = None
    if args.estimator_path:
        # Loaded as a member of this checkout's kernelgym_pallas package (its relative imports,
        # tpu_target, resolve here); nothing of the estimator's branch is copied.
        import kernelgym_pallas
        estimator = _load_module(pathlib.Path(args.estimator_path), "kernelgym_pallas.tpu_estimate")
        kernelgym_pallas.tpu_estimate = estimator
    started = time.perf_counter()
    target = tpu_target.open_target(TARGET)
    program = pathlib.Path(args.child_program)
    module = _load_module(program, f"jaxbench_{program.parent.name}_{program.stem}")
    create = module.create_inputs
    make = (lambda: create(dtype=jnp.bfloat16)) if "dtype" in create.__code__.co_varnames else create
    try:
        specs = jax.eval_shape(make)       # no full-size arrays on this machine's CPU
    except Exception:
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), make())
    if not isinstance(specs, (list, tuple)):
        specs = (specs,)
    specs = [jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in specs]
    out_shape = jax.eval_shape(module.workload, *specs)
    out_shape = list(out_shape.shape) if hasattr(out_shape, "shape") else None
    compiled = tpu_target.compile_for(target, module.workload, specs)
    hlo = compiled.executable.as_text() or ""
    dump = pathlib.Path(args.child_dump) if args.child_dump else None
    cycles: dict[str, int] = {}
    if dump is not None:
        for path in sorted(dump.glob("*" + _PROFILE_SUFFIX)):
            for name, c in _ESTIMATE_RE.findall(path.read_text(errors="replace")):
                cycles[name] = cycles.get(name, 0) + int(c)
    result = {
        "status": "ok",
        "output_shape": out_shape,
        "compile_seconds": compiled.seconds,
        "cost": compiled.cost,
        "optimal_seconds": compiled.cost.get("optimal_seconds"),
        "llo_cycles": sum(cycles.values()) if dump is not None else None,
        "llo_ops": len(cycles),
        "llo_top": sorted(cycles.items(), key=lambda kv: -kv[1])[:5],
        "llo_zero_ops": sorted(op for op, c in cycles.items() if c == 0)[:10],
        "hlo_facts": _hlo_facts(hlo),
    }
    if estimator is not None and dump is not None:
        est = estimator.estimate(module.workload, specs, target, dump, compiled=compiled)
        result["combined_seconds"] = est.seconds
        result["combined"] = {"mosaic_cycles": est.mosaic_cycles, "mosaic_seconds": est.mosaic_seconds,
                              "xla_seconds": est.xla_seconds, "trusted": est.trusted,
                              "reasons": [r[:200] for r in est.reasons[:6]]}
    result["wall_seconds"] = time.perf_counter() - started
    return result


def _hlo_facts(hlo: str) -> dict:
    """What the figures may miss, read off the optimized HLO: while loops (counted once by the
    static profile), convolutions, Mosaic custom calls."""
    return {"while_loops": len(re.findall(r"\swhile\(", hlo)),
            "convolutions": len(re.findall(r"\sconvolution\(", hlo)),
            "mosaic_calls": hlo.count('custom_call_target="tpu_custom_call"'),
            "fusions": len(re.findall(r"\sfusion\(", hlo))}


# ---- the parent: run children with bounds, cache, compare ---------------------------------------

def libtpu_version() -> str:
    try:
        from importlib import metadata
        return metadata.version("libtpu")
    except Exception:
        return "unknown"


def dir_bytes(path: pathlib.Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_child(program: pathlib.Path, with_dump: bool, estimator_path: str | None, args) -> dict:
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="kg-cal-", dir=args.scratch_root))
    try:
        logs, dump = scratch / "tpu_logs", scratch / "llo_profile"
        logs.mkdir()
        dump.mkdir()
        out_file = scratch / "result.json"
        env = dict(os.environ)
        sys.path.insert(0, str(PALLAS_PKG))
        from kernelgym_pallas import tpu_target
        env.update(tpu_target.deviceless_environment(TARGET))
        env.update({"TPU_STDERR_LOG_LEVEL": "3", "TPU_MIN_LOG_LEVEL": "3", "TF_CPP_MIN_LOG_LEVEL": "3",
                    "TPU_LOG_DIR": str(logs), "TMPDIR": str(scratch), "JAX_COMPILATION_CACHE_DIR": ""})
        env["LIBTPU_INIT_ARGS"] = f"--xla_jf_dump_static_llo_profile_to={dump}" if with_dump else ""
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child-program", str(program),
               "--child-out", str(out_file)]
        if with_dump:
            cmd += ["--child-dump", str(dump)]
            if estimator_path:
                cmd += ["--estimator-path", estimator_path]
        stderr_file = scratch / "stderr.txt"
        start = time.perf_counter()
        with open(stderr_file, "wb") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            why = None
            while proc.poll() is None:
                time.sleep(0.5)
                elapsed = time.perf_counter() - start
                size = dir_bytes(scratch)
                rss = rss_bytes(proc.pid)
                if elapsed > args.timeout_s:
                    why = f"time limit {args.timeout_s:.0f} s"
                elif size > args.max_scratch_mb * 2**20:
                    why = f"scratch (logs, dump, stderr) over {args.max_scratch_mb} MB"
                elif rss > args.max_rss_mb * 2**20:
                    why = f"resident memory over {args.max_rss_mb} MB"
                if why:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
        wall = time.perf_counter() - start
        scratch_mb = dir_bytes(scratch) / 2**20
        if why:
            return {"status": "skipped", "error": f"killed: {why}", "wall_seconds": wall, "scratch_mb": scratch_mb}
        if not out_file.exists():
            tail = stderr_file.read_bytes()[-600:].decode(errors="replace")
            return {"status": "error", "error": f"exit {proc.returncode}, no result; stderr: {tail}",
                    "wall_seconds": wall, "scratch_mb": scratch_mb}
        result = json.loads(out_file.read_text())
        result["scratch_mb"] = scratch_mb
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def cache_key(program: pathlib.Path, with_dump: bool, estimator_path: str | None) -> str:
    h = hashlib.sha256()
    h.update(program.read_bytes())
    h.update(f"{TARGET} {libtpu_version()} dump={with_dump} v1".encode())
    h.update((PALLAS_PKG / "kernelgym_pallas" / "tpu_target.py").read_bytes())
    if with_dump and estimator_path:
        h.update(pathlib.Path(estimator_path).read_bytes())
    return h.hexdigest()[:20]


def measure(program: pathlib.Path, with_dump: bool, estimator_path: str | None, args, log,
            cached_only: bool = False) -> dict:
    cache = pathlib.Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    key = cache_key(program, with_dump, estimator_path)
    entry = cache / f"{program.parent.name}.{program.stem}.{'dump' if with_dump else 'xla'}.{key}.json"
    if entry.exists() and not args.no_cache:
        result = json.loads(entry.read_text())
        result["cached"] = True
        return result
    if cached_only or args.cached_only:
        return {"status": "not_run", "error": "not in the cache and not compiled in this run"}
    log(f"  compiling {program.parent.name}/{program.name} ({'with the LLO profile' if with_dump else 'XLA only'})")
    result = run_child(program, with_dump, estimator_path, args)
    if result.get("status") in ("ok", "skipped"):   # errors are retried on the next run
        entry.write_text(json.dumps(result))
    return result


def parse_shape(text: str) -> list[int] | None:
    text = text.strip()
    return [int(x) for x in json.loads(text)] if text else None


def read_results(jaxbench: pathlib.Path) -> dict[tuple[str, str], dict]:
    rows = {}
    with open(jaxbench / "benchmark" / "results.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "success":
                continue
            rows[(row["workload"], row["variant"])] = {"median_ms": float(row["median_ms"]),
                                                      "output_shape": parse_shape(row["output_shape"]),
                                                      "timing_method": row["timing_method"]}
    return rows


def workload_order(name: str) -> tuple[int, str]:
    m = re.match(r"(\d+)", name)
    return (int(m.group(1)) if m else 999, name)


# ---- statistics (one small unit) -----------------------------------------------------------------

def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties get their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float:
    """Pearson's correlation of the ranks (ties averaged), as scipy.stats.spearmanr."""
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def fit_scale(estimates: list[float], measured: list[float]) -> tuple[float, float]:
    """(median of measured/estimate, geometric mean of measured/estimate): the log-space fits."""
    logs = [math.log(m / e) for e, m in zip(estimates, measured)]
    return math.exp(statistics.median(logs)), math.exp(statistics.fmean(logs))


def within(ratio: float, factor: float) -> bool:
    return 1 / factor <= ratio <= factor


def summarize(pairs: list[tuple[str, float, float]]) -> dict:
    """pairs: (workload, estimate, measured seconds); estimates must be > 0."""
    if len(pairs) < 3:
        return {"n": len(pairs)}
    names, est, meas = zip(*pairs)
    scale, scale_lsq = fit_scale(list(est), list(meas))
    ratios = [scale * e / m for e, m in zip(est, meas)]
    return {"n": len(pairs), "spearman": spearman(list(est), list(meas)), "scale": scale,
            "scale_least_squares_logs": scale_lsq,
            "within_1_5x": sum(within(r, 1.5) for r in ratios) / len(ratios),
            "within_2x": sum(within(r, 2.0) for r in ratios) / len(ratios),
            "ratios": dict(zip(names, ratios))}


# ---- the run -------------------------------------------------------------------------------------

def estimate_of(result: dict | None, method: str) -> float | None:
    if not result or result.get("status") != "ok":
        return None
    value = {"xla": result.get("optimal_seconds"), "llo": result.get("llo_cycles"),
             "combined": result.get("combined_seconds")}[method]
    return float(value) if value is not None and value > 0 else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jaxbench-dir", default=str(REPO.parent / "shared" / "jaxbench"))
    p.add_argument("--estimator-path", default=None,
                   help="tpu_estimate.py to load as kernelgym_pallas.tpu_estimate (the 'combined' method)")
    p.add_argument("--only", default=None, help="regex on the workload name")
    p.add_argument("--limit", type=int, default=None, help="at most this many workloads")
    p.add_argument("--no-llo", action="store_true", help="skip the compiles with the static profile dump")
    p.add_argument("--llo-only", action="store_true",
                   help="compile only with the profile dump; XLA-only results are taken from the cache")
    p.add_argument("--llo-only-re", default=None,
                   help="regex: the workloads compiled with the profile dump (others only from the cache)")
    p.add_argument("--cached-only", action="store_true", help="compile nothing: report what the cache holds")
    p.add_argument("--timeout-s", type=float, default=300.0, help="per compile")
    p.add_argument("--max-scratch-mb", type=float, default=512.0, help="logs + dump per compile")
    p.add_argument("--max-rss-mb", type=float, default=6000.0, help="resident memory per compile")
    p.add_argument("--cache-dir", default=str(REPO / "build" / "tpu_estimate_calibration"))
    p.add_argument("--scratch-root", default=None, help="where each compile's scratch folder goes (default TMPDIR)")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--json", default=None, help="write the full results here")
    p.add_argument("--markdown", default=None, help="write the report here (it is printed too)")
    p.add_argument("--child-program", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--child-dump", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_program:
        return child_main(args)
    if args.estimator_path:
        args.estimator_path = str(pathlib.Path(args.estimator_path).resolve())

    jaxbench = pathlib.Path(args.jaxbench_dir)
    measured = read_results(jaxbench)
    bench = jaxbench / "benchmark"
    workloads = sorted({w for (w, v) in measured if v == "baseline" and (bench / w / "baseline.py").is_file()},
                       key=workload_order)
    if args.only:
        workloads = [w for w in workloads if re.search(args.only, w)]
    if args.limit is not None:
        workloads = workloads[:args.limit]
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    started = time.perf_counter()
    rows = []
    for w in workloads:
        variants = ["baseline"] + (["optimized"] if (w, "optimized") in measured
                                   and (bench / w / "optimized.py").is_file() else [])
        for v in variants:
            program = bench / w / f"{v}.py"
            row = {"workload": w, "variant": v, "measured_ms": measured[(w, v)]["median_ms"],
                   "measured_shape": measured[(w, v)]["output_shape"]}
            log(f"{w} {v}")
            xla = measure(program, False, None, args, log, cached_only=args.llo_only)
            row["xla_run"] = xla
            if not args.no_llo and (not args.llo_only_re or re.search(args.llo_only_re, w)):
                row["dump_run"] = measure(program, True, args.estimator_path, args, log)
            elif not args.no_llo:
                row["dump_run"] = measure(program, True, args.estimator_path, args, log, cached_only=True)
            source = row.get("dump_run") if row.get("dump_run", {}).get("status") == "ok" else xla
            row["shape"] = source.get("output_shape") if source.get("status") == "ok" else None
            row["shape_matches"] = row["shape"] is not None and row["shape"] == row["measured_shape"]
            for m in METHODS:
                run = xla if m == "xla" else row.get("dump_run")
                row[m] = estimate_of(run, m)
            if row["xla"] is None:   # the dump compile is the same compile: its XLA figure is the same
                row["xla"] = estimate_of(row.get("dump_run"), "xla")
            rows.append(row)
    report = analyse(rows, args)
    report["run_seconds"] = time.perf_counter() - started
    report["libtpu"] = libtpu_version()
    text = render(report)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


def analyse(rows: list[dict], args) -> dict:
    base = {r["workload"]: r for r in rows if r["variant"] == "baseline"}
    opt = {r["workload"]: r for r in rows if r["variant"] == "optimized"}
    matched = [r for r in base.values() if r["shape_matches"]]
    baselines = {}
    for m in METHODS:
        pairs = [(r["workload"], r[m], r["measured_ms"] / 1e3) for r in matched if r[m]]
        baselines[m] = summarize(pairs)
    pallas = {}
    for m in METHODS:
        cases = []
        for w, o in opt.items():
            b = base.get(w)
            if not b or not b["shape_matches"] or not o["shape_matches"] or not b[m] or not o[m]:
                continue
            est, meas = b[m] / o[m], b["measured_ms"] / o["measured_ms"]
            cases.append({"workload": w, "estimated_speedup": est, "measured_speedup": meas,
                          "direction_ok": (est > 1) == (meas > 1), "within_1_5x": within(est / meas, 1.5)})
        pallas[m] = {"n": len(cases), "direction_ok": sum(c["direction_ok"] for c in cases),
                     "within_1_5x": sum(c["within_1_5x"] for c in cases), "cases": cases}
    return {"target": TARGET, "estimator_path": args.estimator_path, "rows": rows,
            "baselines": baselines, "pallas": pallas,
            "unmatched": [(r["workload"], r["variant"], r["shape"], r["measured_shape"],
                           (r.get("dump_run") or r["xla_run"]).get("error"))
                          for r in rows if not r["shape_matches"]]}


def _fmt(x, spec=".3g") -> str:
    return "—" if x is None else format(x, spec)


def render(report: dict) -> str:
    lines = [f"TPU estimate calibration, target {report['target']}, libtpu {report['libtpu']}, "
             f"run {report['run_seconds']:.0f} s", ""]
    lines += ["| method | matched baselines | Spearman | fitted scale (median, log space) | lsq-on-logs scale "
              "| within 1.5x | within 2x | Pallas direction | Pallas speedup within 1.5x |",
              "|---|---|---|---|---|---|---|---|---|"]
    for m in METHODS:
        s, pk = report["baselines"][m], report["pallas"][m]
        if s.get("n", 0) < 3:
            lines.append(f"| {m} | {s.get('n', 0)} | — | — | — | — | — | {pk['direction_ok']}/{pk['n']} | "
                         f"{pk['within_1_5x']}/{pk['n']} |")
            continue
        lines.append(f"| {m} | {s['n']} | {s['spearman']:.3f} | {s['scale']:.4g} | {s['scale_least_squares_logs']:.4g} "
                     f"| {100 * s['within_1_5x']:.0f}% | {100 * s['within_2x']:.0f}% | {pk['direction_ok']}/{pk['n']} "
                     f"| {pk['within_1_5x']}/{pk['n']} |")
    lines += ["", "Per workload (estimate x fitted scale / measured; 1.00 is exact):", "",
              "| workload | variant | measured ms | xla est. ms | xla ratio | LLO Mcycles | llo ratio | combined est. ms "
              "| combined ratio | while loops | convolutions | Mosaic calls |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        run = r.get("dump_run") if (r.get("dump_run") or {}).get("status") == "ok" else r["xla_run"]
        facts = run.get("hlo_facts", {}) if run.get("status") == "ok" else {}
        cells = [r["workload"], r["variant"], f"{r['measured_ms']:.3f}"]
        for m in METHODS:
            ratio = report["baselines"][m].get("ratios", {}).get(r["workload"]) if r["variant"] == "baseline" else None
            value = r[m]
            shown = None if value is None else (value / 1e6 if m == "llo" else value * 1e3)
            cells += [_fmt(shown), _fmt(ratio, ".2f")]
        cells += [str(facts.get("while_loops", "—")), str(facts.get("convolutions", "—")),
                  str(facts.get("mosaic_calls", "—"))]
        if not r["shape_matches"]:
            cells[1] += " (no result)" if r["shape"] is None else " (shape differs)"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Pallas kernels, estimated vs measured speedup over the baseline:", "",
              "| workload | measured | " + " | ".join(f"{m} est." for m in METHODS) + " |",
              "|---|---|" + "---|" * len(METHODS)]
    by_w: dict[str, dict] = {}
    for m in METHODS:
        for c in report["pallas"][m]["cases"]:
            by_w.setdefault(c["workload"], {"measured": c["measured_speedup"]})[m] = c["estimated_speedup"]
    for w, d in sorted(by_w.items(), key=lambda kv: workload_order(kv[0])):
        lines.append(f"| {w} | {d['measured']:.2f} | " + " | ".join(_fmt(d.get(m), ".2f") for m in METHODS) + " |")
    if report["unmatched"]:
        lines += ["", "Not compared (output shape differs from results.csv, or no result):", ""]
        for w, v, shape, want, err in report["unmatched"]:
            lines.append(f"- {w} {v}: got {shape}, measured {want}" + (f"; {err[:160]}" if err else ""))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
