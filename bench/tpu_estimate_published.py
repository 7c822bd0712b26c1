#!/usr/bin/env python3
"""The TPU estimate against published TPU measurements it was never fitted to.

    build/pallas-venv/bin/python bench/tpu_estimate_published.py [--target v5e] [--json out.json]

Source (v5e): the JAX documentation's Pallas TPU matrix multiplication guide
(https://docs.jax.dev/en/latest/pallas/tpu/matmul.html, its notebook's recorded outputs; run on
one TPU v5e chip, bf16 inputs, `timeit` over 100 calls of a jitted function, Python dispatch
included): XLA's `jnp.matmul` and a blocked Pallas matmul (an f32 accumulator in VMEM, the
contraction axis last in the grid) at 1024^3, 4096^3 and 8192^3, in blocks of 128^3 and of
bm=512, bk=1024, bn=1024, plain, with the right-hand side in transposed layout, and with a ReLU
fused into the write-back: 18 Pallas kernels, 3 XLA baselines. The kernels are written here from
that description (not copied); the times are the guide's.

Nothing in the estimator was fitted on these points (its constants come from XLA's own cost
model and libtpu's static profile, tpu_estimate.py's notes), so every figure here is held out.
Each program is compiled deviceless for the target in this process, as the judge does
(tpu_estimate.estimate with its default "bundles" mode), the reference as trusted code.

Reported: Spearman's rank correlation of estimated and measured times (over the Pallas kernels,
over the baselines); each kernel's estimated speedup over XLA's matmul of the same size against
the measured one (within 1.5x; direction where the measured speedup is more than 10% from 1);
and every pair of kernels whose measured speedups differ by more than 10%: is the faster one
estimated faster.

Then the same figures "as timed": the estimate is the device's time, the guide's figures are a
Python call's, so each side of a measured speedup carries the host's dispatch. Modelled as one
constant added to every estimated time, taken from one point only, the smallest XLA baseline
(its measured time less its estimated one): the 18 kernels' speedups stay held out (none of
them enters it), and both analyses are printed.

    build/pallas-venv/bin/python bench/tpu_estimate_published.py --from-json published.json
re-analyses a saved run without compiling.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tpu_runner" / "pallas"))
sys.path.insert(0, str(REPO / "bench"))

SOURCE = "https://docs.jax.dev/en/latest/pallas/tpu/matmul.html (recorded notebook outputs, TPU v5e)"
# (size, variant, blocks or None for XLA's jnp.matmul) -> measured seconds, TPU v5e, bf16.
MEASURED_V5E = {
    (1024, "xla", None): 0.00011943008983507753,
    (4096, "xla", None): 0.0008272899803705514,
    (8192, "xla", None): 0.006047147869830951,
    (1024, "plain", (128, 128, 128)): 0.00029766598949208854,
    (4096, "plain", (128, 128, 128)): 0.011771515250438824,
    (8192, "plain", (128, 128, 128)): 0.09183577066054567,
    (1024, "plain", (512, 1024, 1024)): 0.00012708659982308746,
    (4096, "plain", (512, 1024, 1024)): 0.00088908776990138,
    (8192, "plain", (512, 1024, 1024)): 0.006099433819763363,
    (1024, "transposed_rhs", (128, 128, 128)): 0.0003029372810851783,
    (4096, "transposed_rhs", (128, 128, 128)): 0.012017967159627005,
    (8192, "transposed_rhs", (128, 128, 128)): 0.09500920018996112,
    (1024, "transposed_rhs", (512, 1024, 1024)): 0.00012131539988331496,
    (4096, "transposed_rhs", (512, 1024, 1024)): 0.0008790623804088682,
    (8192, "transposed_rhs", (512, 1024, 1024)): 0.006107717020204291,
    (1024, "relu", (128, 128, 128)): 0.00030103540048003196,
    (4096, "relu", (128, 128, 128)): 0.011807117109419778,
    (8192, "relu", (128, 128, 128)): 0.09181861146935262,
    (1024, "relu", (512, 1024, 1024)): 0.00012622540001757442,
    (4096, "relu", (512, 1024, 1024)): 0.000896632740041241,
    (8192, "relu", (512, 1024, 1024)): 0.006130605939542875,
}


def blocked_matmul(bm: int, bk: int, bn: int, transposed_rhs: bool, activation):
    """A matmul over a (m/bm, n/bn, k/bk) grid accumulating in an f32 VMEM scratch, the result
    written (through `activation`) at the last contraction step."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    contract = ((1,), (1,)) if transposed_rhs else ((1,), (0,))

    def body(x_ref, y_ref, out_ref, acc_ref):
        last = pl.num_programs(2) - 1

        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        acc_ref[...] += jax.lax.dot_general(x_ref[...], y_ref[...], (contract, ((), ())),
                                            preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == last)
        def _():
            out_ref[...] = activation(acc_ref[...]).astype(out_ref.dtype)

    def fn(x, y):
        m, k = x.shape
        n = y.shape[0] if transposed_rhs else y.shape[1]
        y_spec = (pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk)) if transposed_rhs
                  else pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)))
        return pl.pallas_call(
            body, grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), y_spec],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        )(x, y)
    return fn


def program(size: int, variant: str, blocks):
    import jax
    import jax.numpy as jnp
    spec = jax.ShapeDtypeStruct((size, size), jnp.bfloat16)
    if variant == "xla":
        return (lambda x, y: jnp.matmul(x, y)), [spec, spec]
    activation = jax.nn.relu if variant == "relu" else (lambda v: v)
    return blocked_matmul(*blocks, transposed_rhs=variant == "transposed_rhs", activation=activation), [spec, spec]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="v5e", choices=["v5e"])
    p.add_argument("--json", default=None)
    p.add_argument("--from-json", default=None, help="re-analyse the rows of a saved run (no compiles)")
    args = p.parse_args()
    if args.from_json:
        saved = json.loads(pathlib.Path(args.from_json).read_text())
        return report_all(saved["rows"], saved.get("target", args.target), args.json)
    from kernelgym_pallas import tpu_estimate, tpu_target
    for key, value in tpu_target.deviceless_environment(args.target).items():
        os.environ[key] = value
    scratch = tempfile.TemporaryDirectory(prefix="kg-published-")
    dump = tpu_estimate.apply_environment(scratch.name)
    target = tpu_target.open_target(args.target)
    from tpu_estimate_calibration import spearman
    rows = []
    for (size, variant, blocks), measured in MEASURED_V5E.items():
        fn, specs = program(size, variant, blocks)
        started = time.perf_counter()
        est = tpu_estimate.estimate(fn, specs, target, dump, trusted_code=variant == "xla")
        rows.append({"size": size, "variant": variant, "blocks": blocks, "measured_s": measured,
                     "estimated_s": est.seconds, "trusted": est.trusted, "reasons": est.reasons[:3],
                     "kernels": [k.as_json() for k in est.kernels], "seconds": time.perf_counter() - started})
        print(f"{size} {variant} {blocks}: measured {measured * 1e6:.1f} us, estimated {est.seconds * 1e6:.1f} us, "
              f"trusted {est.trusted}", file=sys.stderr, flush=True)
    scratch.cleanup()
    return report_all(rows, args.target, args.json)


def report_all(rows: list[dict], target: str, json_path) -> int:
    report = analyse(rows)
    report["source"] = SOURCE
    report["target"] = target
    print(render(report))
    dispatch = dispatch_constant(rows)
    timed = analyse([dict(r) for r in rows], dispatch)
    timed["source"], timed["target"] = SOURCE, target
    print(f"As timed: {dispatch * 1e6:.1f} us of host dispatch added to every estimated time (the smallest XLA "
          f"baseline's measured time less its estimate; no kernel's time enters it).\n")
    print(render(timed))
    report["as_timed"] = {k: v for k, v in timed.items() if k != "rows"}
    report["as_timed"]["dispatch_s"] = dispatch
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(report, indent=1, default=str))
    return 0


def dispatch_constant(rows: list[dict]) -> float:
    """The host's dispatch in a timed Python call, from the smallest XLA baseline alone: its
    measured time less its estimated device time (never below zero)."""
    smallest = min((r for r in rows if r["variant"] == "xla"), key=lambda r: r["size"])
    return max(0.0, smallest["measured_s"] - smallest["estimated_s"])


def analyse(rows: list[dict], dispatch_s: float = 0.0) -> dict:
    """The figures over `rows`, each estimated time taken as `dispatch_s` more than estimated
    (0: the device's time alone)."""
    from tpu_estimate_calibration import spearman
    for r in rows:
        r["estimated_s"] = r.get("device_estimated_s", r["estimated_s"]) + dispatch_s
        r["device_estimated_s"] = r["estimated_s"] - dispatch_s
    base = {r["size"]: r for r in rows if r["variant"] == "xla"}
    kernels = [r for r in rows if r["variant"] != "xla"]
    for r in kernels:
        b = base[r["size"]]
        r["measured_speedup"] = b["measured_s"] / r["measured_s"]
        r["estimated_speedup"] = b["estimated_s"] / r["estimated_s"]
        r["ratio"] = r["estimated_speedup"] / r["measured_speedup"]
    within = [r for r in kernels if 1 / 1.5 <= r["ratio"] <= 1.5]
    clear = [r for r in kernels if abs(r["measured_speedup"] - 1) > 0.1]
    direction = [r for r in clear if (r["estimated_speedup"] > 1) == (r["measured_speedup"] > 1)]
    pairs = [(a, b) for a, b in itertools.combinations(kernels, 2)
             if max(a["measured_speedup"], b["measured_speedup"]) > 1.1 * min(a["measured_speedup"], b["measured_speedup"])]
    ordered = [(a, b) for a, b in pairs if (a["estimated_speedup"] > b["estimated_speedup"])
               == (a["measured_speedup"] > b["measured_speedup"])]
    return {"rows": rows, "n_kernels": len(kernels),
            "spearman_kernels": spearman([r["estimated_s"] for r in kernels], [r["measured_s"] for r in kernels]),
            "spearman_speedups": spearman([r["estimated_speedup"] for r in kernels],
                                          [r["measured_speedup"] for r in kernels]),
            "spearman_baselines": spearman([b["estimated_s"] for b in base.values()],
                                           [b["measured_s"] for b in base.values()]),
            "speedup_within_1_5x": len(within), "direction_clear": len(clear), "direction_ok": len(direction),
            "pairs": len(pairs), "pairs_ordered": len(ordered)}


def render(report: dict) -> str:
    lines = [f"Published measurements, target {report['target']} ({report['source']}): nothing fitted on them.", "",
             f"- Spearman over the {report['n_kernels']} Pallas kernels' times: {report['spearman_kernels']:.3f}; over "
             f"the 3 XLA baselines: {report['spearman_baselines']:.3f}; over the kernels' speedups (near-ties: the "
             f"512x1024x1024 kernels measure 0.92-0.99, the 128^3 ones 0.064-0.070 at 4096^3 and up): "
             f"{report['spearman_speedups']:.3f}",
             f"- speedup over XLA within 1.5x of the measured one: {report['speedup_within_1_5x']}/{report['n_kernels']}",
             f"- direction (faster or slower than XLA) where the measured speedup is more than 10% from 1: "
             f"{report['direction_ok']}/{report['direction_clear']}",
             f"- pairs of kernels whose measured speedups differ by more than 10%, ordered right: "
             f"{report['pairs_ordered']}/{report['pairs']}", "",
             "| size | variant | blocks (bm, bk, bn) | measured us | estimated us | measured speedup | estimated speedup | "
             "est/meas | trusted |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['size']} | {r['variant']} | {r['blocks'] or '—'} | {r['measured_s'] * 1e6:.1f} | "
                     f"{r['estimated_s'] * 1e6:.1f} | {r.get('measured_speedup', float('nan')):.3f} | "
                     f"{r.get('estimated_speedup', float('nan')):.3f} | {r.get('ratio', float('nan')):.2f} | "
                     f"{'yes' if r['trusted'] else 'no'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
