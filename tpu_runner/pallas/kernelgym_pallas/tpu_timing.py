"""Device time on a TPU host, from the profiler's trace rather than the wall clock.

Reference and candidate alternate, round after round, at the task's full shapes, inside one
`jax.profiler.trace`. Each call runs under a host annotation (`kernelgym:<who>:<round>`) and is
waited for, so every device event of that call falls inside its annotation's window. A call's
device time is the sum of its device op events (the TPU's "XLA Ops" line): what JAXBench reads
from XProf traces, not Python's view of the clock.

Written for a TPU VM and NOT run on the machines this project is tested on (they have no TPU);
docs/pallas.md says what was and was not exercised. Everything it returns is checked by the
runner: fewer than 6 usable rounds and the time is reported as not representative.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import tempfile
import time

import numpy as np

ROUNDS = 30
DMA_WORDS = ("dma", "wait", "sync", "copy", "semaphore")


def measure(task, kernel, reference, target, job: dict) -> dict:
    import jax
    full = task.size_sets["full"]
    seed = int(job.get("timing_seed", 0)) or 1
    inputs = [jax.device_put(x, target.device) for x in task.draw_inputs("full", seed)]
    ref_fn, cand_fn = jax.jit(reference), jax.jit(kernel)
    for fn in (ref_fn, cand_fn, ref_fn, cand_fn):  # compile and warm both before the window
        jax.block_until_ready(fn(*inputs))
    rounds = int(job.get("timing_rounds", ROUNDS))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelgym-trace-") as log_dir:
        with jax.profiler.trace(log_dir, create_perfetto_trace=True):
            for i in range(rounds):
                order = (("reference", ref_fn), ("candidate", cand_fn))
                for who, fn in (order if i % 2 == 0 else order[::-1]):
                    with jax.profiler.TraceAnnotation(f"kernelgym:{who}:{i}"):
                        jax.block_until_ready(fn(*inputs))
        events = _load_trace(log_dir)
    per_call, profile = _device_time_per_call(events)
    samples = []
    for i in range(rounds):
        ref_ns = per_call.get(("reference", i), 0.0)
        cand_ns = per_call.get(("candidate", i), 0.0)
        samples.append({"reference_ns": ref_ns, "candidate_ns": cand_ns})
    cand_times = [s["candidate_ns"] for s in samples if s["candidate_ns"] > 0]
    flops = full.flops or _reference_flops(reference, target, full)
    if cand_times and flops > 0:
        profile["achieved_flops"] = flops / (float(np.median(cand_times)) * 1e-9)
    profile["peak_flops"] = target.peak_flops
    profile["peak_bytes_per_s"] = target.peak_bytes_per_s
    return {"representative": True, "clock": "tpu_device", "samples": samples, "profile": profile,
            "seconds": time.perf_counter() - started,
            "reason": f"device op events of {target.device_kind} from the profiler trace, {rounds} interleaved rounds"}


def _reference_flops(reference, target, full) -> float:
    """XLA's flop count of the reference at the full shapes (the task gives none of its own)."""
    from . import tpu_target
    try:
        return tpu_target.compile_for(target, reference, full.inputs).cost.get("flops", 0.0)
    except Exception:  # the profile goes without achieved FLOP/s rather than failing the timing
        return 0.0


def _load_trace(log_dir: str) -> list[dict]:
    files = glob.glob(os.path.join(log_dir, "**", "*.trace.json.gz"), recursive=True)
    if not files:
        return []
    with gzip.open(sorted(files)[-1], "rt") as f:
        data = json.load(f)
    return data.get("traceEvents", data if isinstance(data, list) else [])


def _device_time_per_call(events: list[dict]) -> tuple[dict, dict]:
    """{(who, round): device ns} and a profile summary of the candidate's device events."""
    process_names = {e.get("pid"): e.get("args", {}).get("name", "") for e in events
                     if e.get("ph") == "M" and e.get("name") == "process_name"}
    thread_names = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "") for e in events
                    if e.get("ph") == "M" and e.get("name") == "thread_name"}
    windows = []
    device_ops = []
    for e in events:
        if e.get("ph") != "X":
            continue
        name = e.get("name", "")
        if name.startswith("kernelgym:"):
            _, who, index = name.split(":")
            windows.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), who, int(index)))
        elif "TPU" in process_names.get(e.get("pid"), "") and \
                "XLA Ops" in thread_names.get((e.get("pid"), e.get("tid")), ""):
            device_ops.append((float(e["ts"]), float(e.get("dur", 0)), name))
    windows.sort()
    per_call: dict = {}
    dma_us = compute_us = 0.0
    for ts, dur, name in device_ops:
        for start, end, who, index in windows:
            if start <= ts <= end:
                per_call[(who, index)] = per_call.get((who, index), 0.0) + dur * 1e3  # trace units: us
                if who == "candidate":
                    if any(word in name.lower() for word in DMA_WORDS):
                        dma_us += dur
                    else:
                        compute_us += dur
                break
    total = dma_us + compute_us
    profile = {"compute_fraction": compute_us / total if total else 0.0,
               "dma_or_wait_fraction": dma_us / total if total else 0.0}
    return per_call, profile
