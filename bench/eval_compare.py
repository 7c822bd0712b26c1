#!/usr/bin/env python3
"""Two builds of kernelgym side by side on the same kernels, in one run (docs/benchmarks.md).

For each (task, kernel) and each build, evaluates the kernel N times with `kernelgym eval --json`
(one process per evaluation, as a user runs it), alternating the builds so that drift of the
machine affects both alike, and reports:
  - the speedup: mean, min-max and CV over the N evaluations;
  - the reference's median time interleaved with the kernel over its median alone (1 = the
    kernel does not change the reference's starting state);
  - the wall time of each evaluation (a cold CLI process; the kernel is compiled cold only when
    --cold is given, by adding a unique comment to its source);
  - the CPU-time speedup: the median over rounds of the reference's CPU time / the kernel's CPU
    time per timed call. Not what the judge pays (it pays wall time), but for single-threaded
    tasks what the wall-time speedup would be without other processes preempting either side:
    on a loaded machine it shows whether a change of the judge changed the work of the calls.

  python3 bench/eval_compare.py --before OLD_BUILD --after build --repeats 10 \\
      --case cpu/softmax_rows=tests/honest/softmax_rows_avx2/kernel.cpp ...
"""
import argparse
import json
import statistics
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


def evaluate(build, task, source, cold, workdir):
    path = Path(source)
    if cold:  # a source the compile cache has never seen
        text = path.read_text() + f"\n// {uuid.uuid4().hex}\n"
        path = Path(workdir) / f"{uuid.uuid4().hex}.cpp"
        path.write_text(text)
    start = time.monotonic()
    # Each build's own harness, reference and executor: the CLI's compiled-in tools folder names
    # the folder it was built in, which a copied build folder does not change.
    env = dict(os.environ, KERNELGYM_TOOLS_DIR=str(Path(build).resolve() / "tpu_runner"))
    out = subprocess.run([str(Path(build) / "cli/kernelgym"), "eval", "--task", task, "--source", str(path), "--json", "--samples"],
                         capture_output=True, text=True, env=env)
    seconds = time.monotonic() - start
    try:
        r = json.loads(out.stdout)
    except json.JSONDecodeError:
        return {"status": "no-json", "seconds": seconds, "message": out.stderr[-300:]}
    timing = r.get("timing") or {}
    alone = timing.get("reference_alone_median_ns") or 0
    ref = (timing.get("reference") or {}).get("median_ns") or 0
    cpu_ratios = [s["reference_cpu_ns"] / s["candidate_cpu_ns"] for s in timing.get("samples") or []
                  if s.get("candidate_cpu_ns")]
    return {"status": r.get("status"), "seconds": seconds, "speedup": timing.get("speedup"),
            "cpu_speedup": statistics.median(cpu_ratios) if cpu_ratios else None,
            "interleaved_over_alone": ref / alone if alone else None, "message": r.get("message", ""),
            "rounds": timing.get("rounds"), "converged": bool(timing.get("converged")),
            "reference_best_ms": ((timing.get("reference") or {}).get("min_ns") or 0) / 1e6,
            "candidate_best_ms": ((timing.get("candidate") or {}).get("min_ns") or 0) / 1e6,
            "scheduling": timing.get("scheduling", "")}


def summarize(rows):
    ok = [r for r in rows if r["status"] == "ok" and r["speedup"]]
    s = [r["speedup"] for r in ok]
    ratio = [r["interleaved_over_alone"] for r in ok if r["interleaved_over_alone"]]
    wall = [r["seconds"] for r in rows]
    out = {"ok": len(ok), "n": len(rows), "wall_median_s": statistics.median(wall),
           "rounds": [r.get("rounds") for r in rows], "converged": sum(bool(r.get("converged")) for r in rows)}
    if s:
        mean = statistics.mean(s)
        out.update(speedup_mean=mean, speedup_min=min(s), speedup_max=max(s),
                   speedup_cv=(statistics.stdev(s) / mean if len(s) > 1 else 0.0))
    cpu = [r["cpu_speedup"] for r in ok if r.get("cpu_speedup")]
    if cpu:
        mean = statistics.mean(cpu)
        out.update(cpu_speedup_mean=mean, cpu_speedup_cv=(statistics.stdev(cpu) / mean if len(cpu) > 1 else 0.0))
    if ratio:
        out["ref_interleaved_over_alone_median"] = statistics.median(ratio)
    for side in ("reference", "candidate"):
        best = [r[f"{side}_best_ms"] for r in ok if r.get(f"{side}_best_ms")]
        if best:
            out[f"{side}_best_ms_range"] = [round(min(best), 4), round(max(best), 4)]
    out["scheduling"] = sorted({r.get("scheduling") or "" for r in ok})
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        out["not_ok"] = [f'{r["status"]}: {r["message"][:160]}' for r in bad[:3]]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the old build folder")
    parser.add_argument("--after", required=True, help="the new build folder")
    parser.add_argument("--case", action="append", required=True, help="TASK=KERNEL_PATH")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="compile every evaluation cold")
    parser.add_argument("--json", help="also write the raw rows here")
    args = parser.parse_args()
    raw = {}
    with tempfile.TemporaryDirectory() as workdir:
        for case in args.case:
            task, kernel = case.split("=", 1)
            rows = {"before": [], "after": []}
            for i in range(args.repeats):
                for name in (("before", "after") if i % 2 == 0 else ("after", "before")):
                    build = args.before if name == "before" else args.after
                    rows[name].append(evaluate(build, task, kernel, args.cold, workdir))
            raw[case] = rows
            for name in ("before", "after"):
                print(json.dumps({"case": case, "build": name, **summarize(rows[name])}))
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
