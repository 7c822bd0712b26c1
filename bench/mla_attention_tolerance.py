"""Derives the bfloat16 tolerance of jaxbench-p/mla_attention's Pallas version (docs/task_format.md
"dtypes": `rounded.summed` with a `scale` taken after the output's Jacobian, as for
triangle_multiplication), from the task's own inputs at its checked size sets:

    build/pallas-venv/bin/python bench/mla_attention_tolerance.py [--probes 64] [--seeds 1 2]

The reference rounds 16 intermediates to bfloat16 (ROUNDED). A kernel that rounds the same values
from float32 sums in another order lands at most one ulp (eps |z_e|) from the reference on each
element e of each; with independent signs the output element o moves by eps / sqrt(3) x
rss_k(o) in standard deviation, rss_k(o) = sqrt(sum_e (J_oe z_e)^2) with J the Jacobian of the
output in intermediate k. The bound per intermediate is 6 such deviations, 6 / sqrt(3) x
rss_k(o), and its scale the largest over every output element of every draw at both checked sets.

rss_k(o) for every o at once: with r a random +-1 vector over intermediate k's elements, the
forward derivative J (z o r) has mean square sum_e (J_oe z_e)^2 over r (Hutchinson's estimator);
the mean over `--probes` draws of r estimates it (the largest over the outputs of a noisy
estimate errs upward). For o, p and v, whose way to the output is linear (given p), rss is
computed exactly; p's estimate is printed beside its exact figure to show the estimator's spread.

Prints, per intermediate, the largest bound over the outputs and draws; per output element the sum
of the 16 bounds (every intermediate's rounding at once), whose largest value over the outputs and
draws is pallas.json's `summed` x `scale`; and the output's rms for comparison.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tpu_runner" / "pallas"))
from kernelgym_pallas import task_spec  # noqa: E402

TASK = ROOT / "datasets" / "suites" / "jaxbench-p" / "mla_attention"
ROUNDED = ("a_q", "n_q", "cq", "q", "a_kv", "n_kv", "c", "k_nope", "v", "k_pe_raw", "cos", "sin", "q_pe", "k_pe",
           "p", "o")
F32 = jnp.float32
EXACT = jax.lax.Precision.HIGHEST
DN, DR, DV = 64, 32, 64


# Plausible wrong kernels (model(..., wrong=...)), each a mistake of a tiled kernel, to show the
# derived tolerance is not loose: the last 256-deep tile of the DM-deep down-projections dropped,
# the first 128-key block dropped for the queries past it, the softmax scale skipped, the last
# 256-deep tile of the output projection (heads 4-7) dropped.
WRONG = ("drop_dm_tile", "drop_key_block", "skip_scale", "drop_out_tile")


def model(inputs, hook, wrong=None):
    """The reference's computation in float32, `hook(name, value)` at each value it rounds to
    bfloat16 (ROUNDED); the output before its own rounding. `wrong`: one of WRONG."""
    x, w_dq, q_norm, w_uq, w_dkv, kv_norm, w_uk, w_uv, w_kr, w_o = (a.astype(F32) for a in inputs)
    S = x.shape[0]
    H = w_uk.shape[1] // DN
    x_down = x.at[:, -256:].set(0.0) if wrong == "drop_dm_tile" else x

    def dot(a, b):
        return jnp.matmul(a, b, precision=EXACT)

    def rms_norm(y, w, tag):
        n = hook("n_" + tag, y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6))
        return n * w

    def rope(t, cos, sin):
        t1, t2 = t[..., :DR // 2], t[..., DR // 2:]
        return jnp.concatenate([t1 * cos - t2 * sin, t2 * cos + t1 * sin], axis=-1)

    cq = hook("cq", rms_norm(hook("a_q", dot(x_down, w_dq)), q_norm, "q"))
    q = hook("q", dot(cq, w_uq)).reshape(S, H, DN + DR).transpose(1, 0, 2)
    c = hook("c", rms_norm(hook("a_kv", dot(x_down, w_dkv)), kv_norm, "kv"))
    k_nope = hook("k_nope", dot(c, w_uk)).reshape(S, H, DN).transpose(1, 0, 2)
    v = hook("v", dot(c, w_uv)).reshape(S, H, DV).transpose(1, 0, 2)
    inv_freq = 1.0 / jnp.power(10000.0, jnp.arange(0, DR, 2, dtype=F32) / DR)
    angle = jnp.arange(S, dtype=F32)[:, None] * inv_freq[None, :]
    cos, sin = hook("cos", jnp.cos(angle)), hook("sin", jnp.sin(angle))
    k_pe = hook("k_pe", rope(hook("k_pe_raw", dot(x_down, w_kr)), cos, sin))
    q_pe = hook("q_pe", rope(q[:, :, DN:], cos, sin))
    scores = dot(q[:, :, :DN], jnp.swapaxes(k_nope, 1, 2)) + dot(q_pe, k_pe.T)
    if wrong != "skip_scale":
        scores = scores / math.sqrt(DN + DR)
    pos = jnp.arange(S)
    masked = pos[None, :] > pos[:, None]
    if wrong == "drop_key_block":
        masked = masked | ((pos[None, :] < 128) & (pos[:, None] >= 128))
    scores = jnp.where(masked, -jnp.inf, scores)
    p = hook("p", jax.nn.softmax(scores, axis=-1))
    o = hook("o", dot(p, v).transpose(1, 0, 2).reshape(S, H * DV))
    if wrong == "drop_out_tile":
        o = o.at[:, -256:].set(0.0)
    return dot(o, w_o)


def identity(name, value):
    return value


def to_bf16(name, value):
    return value.astype(jnp.bfloat16).astype(F32)


def rss_hutchinson(inputs, name, probes, key, batch=8):
    """Per output element, the estimate of sqrt(sum_e (J_oe z_e)^2) over intermediate `name`."""
    def out_given(inputs, signs):
        def hook(n, value):
            return value * (1.0 + signs) if n == name else value
        return model(inputs, hook)

    shape = {}

    def capture(n, value):
        if n == name:
            shape["s"] = value.shape
        return value

    jax.eval_shape(lambda: model(inputs, capture))

    @jax.jit
    def squares(inputs, keys):   # the inputs are arguments, not constants XLA would fold
        def one(k):
            r = jax.random.rademacher(k, shape["s"], dtype=F32)
            _, tangent = jax.jvp(lambda t: out_given(inputs, t * r), (jnp.zeros((), F32),), (jnp.ones((), F32),))
            return tangent * tangent
        return jnp.sum(jax.vmap(one)(keys), axis=0)

    total = 0.0
    for start in range(0, probes, batch):
        key, sub = jax.random.split(key)
        total = total + squares(inputs, jax.random.split(sub, batch))
    probes = -(-probes // batch) * batch
    return np.sqrt(np.asarray(total) / probes)


def rss_exact(inputs):
    """sqrt(sum_e (J_oe z_e)^2) exactly for o (out = o . w_o), p (out = sum_h p_h . (v_h . w_o_h))
    and v (out = sum_h (p_h . v_h) . w_o_h)."""
    values = {}

    def keep(n, value):
        values[n] = value
        return value

    model(inputs, keep)
    w_o = inputs[9].astype(F32)
    o, p = values["o"], values["p"]                     # o [S, H*DV], p [H, S, S]
    H, S = p.shape[0], p.shape[1]
    v = values["v"].reshape(S, H, DV).transpose(1, 0, 2)  # [H, S, DV]
    rss_o = jnp.sqrt(jnp.matmul(o * o, w_o * w_o, precision=EXACT))
    u = jnp.einsum("hjd,hdm->hjm", v, w_o.reshape(H, DV, -1), precision=EXACT)   # [H, S, DM]
    rss_p = jnp.sqrt(jnp.einsum("hsj,hjm->sm", p * p, u * u, precision=EXACT))
    pv = jnp.einsum("hsj,hjd->shd", p * p, v * v, precision=EXACT).reshape(S, H * DV)
    rss_v = jnp.sqrt(jnp.matmul(pv, w_o * w_o, precision=EXACT))
    return {"o": np.asarray(rss_o), "p": np.asarray(rss_p), "v": np.asarray(rss_v)}


def compare_kernels(task, reference, args) -> None:
    """Per size set and seed: the largest |error| / (atol + rtol |expected|) over the output and how
    many elements fail, for kernels that round as the reference does (but sum in another order),
    keep every intermediate in float32, or make one of the WRONG mistakes."""
    for size_set in args.sets:
        spec = task.size_sets[size_set].outputs[0]
        for seed in args.seeds:
            inputs = [jnp.asarray(a) for a in task.draw_inputs(size_set, seed)]
            ref = np.asarray(reference(*inputs).astype(F32), dtype=np.float64)
            allowed = spec.atol + spec.rtol * np.abs(ref)
            kernels = {"rounds as the reference": lambda: model(inputs, to_bf16),
                       "float32 intermediates": lambda: model(inputs, identity)}
            kernels.update({name: (lambda name=name: model(inputs, to_bf16, name)) for name in WRONG})
            print(f"{size_set} seed {seed}: atol {spec.atol:.4g}, rtol {spec.rtol:.4g}; the output's rms "
                  f"{np.sqrt(np.mean(ref ** 2)):.4g}, its last row's {np.sqrt(np.mean(ref[-1] ** 2)):.4g}", flush=True)
            for name, run in kernels.items():
                out = np.asarray(run().astype(jnp.bfloat16).astype(F32), dtype=np.float64)
                ratio = np.abs(out - ref) / allowed
                print(f"  {name:24s} largest |error| / tolerance {ratio.max():.3g}, {int(np.sum(ratio > 1))} of "
                      f"{ratio.size} elements fail", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sets", nargs="+", default=["small", "check"])
    parser.add_argument("--wrong", action="store_true",
                        help="instead: how much of pallas.json's tolerance honest and wrong kernels (WRONG) use")
    args = parser.parse_args()
    task = task_spec.load_kernelgym_task(TASK)
    reference = task.reference()
    if args.wrong:
        return compare_kernels(task, reference, args)
    bound = 6.0 / math.sqrt(3.0)
    worst = {name: 0.0 for name in ROUNDED}
    worst_sum = 0.0   # the largest, over output elements, of the sum of the 16 bounds at that element
    key = jax.random.PRNGKey(0)
    for size_set in args.sets:
        for seed in args.seeds:
            inputs = [jnp.asarray(a) for a in task.draw_inputs(size_set, seed)]
            # The model with bfloat16 rounding at its hooks is the reference (up to the output's own
            # rounding and one ulp where a sum's order differs): the hooks sit where it rounds.
            ref = np.asarray(reference(*inputs).astype(F32))
            mod = np.asarray(model(inputs, to_bf16).astype(jnp.bfloat16).astype(F32))
            out32 = np.asarray(model(inputs, identity))
            rms = float(np.sqrt(np.mean(out32 ** 2)))
            ulp = np.abs(ref) * 2.0 ** -7
            print(f"{size_set} seed {seed}: output rms {rms:.4g}; model vs reference max |diff| "
                  f"{np.max(np.abs(mod - ref)):.3g} ({np.mean(np.abs(mod - ref) > ulp + 1e-30):.2%} of elements beyond "
                  f"one ulp); float32 model vs reference max |diff| {np.max(np.abs(out32 - ref)):.3g}", flush=True)
            exact = rss_exact(inputs)
            summed = 0.0
            for name in ROUNDED:
                key, sub = jax.random.split(key)
                if name in exact and name != "p":
                    # exact; p's estimate is kept as a check of the estimator against the exact figure
                    rss = exact[name]
                    line = f"  {name:9s} largest 6/sqrt(3) rss {bound * rss.max():.4g} (mean {bound * rss.mean():.3g}), exact"
                else:
                    rss = rss_hutchinson(inputs, name, args.probes, sub)
                    line = f"  {name:9s} largest 6/sqrt(3) rss {bound * rss.max():.4g} (mean {bound * rss.mean():.3g})"
                if name == "p":
                    line += (f"; exact: largest {bound * exact[name].max():.4g} (mean {bound * exact[name].mean():.3g}), "
                             f"estimate/exact per element: median {np.median(rss / exact[name]):.3f}, "
                             f"1st-99th percentile {np.percentile(rss / exact[name], 1):.3f}-"
                             f"{np.percentile(rss / exact[name], 99):.3f}")
                    rss = exact[name]
                worst[name] = max(worst[name], bound * float(rss.max()))
                summed = summed + bound * rss
                print(line, flush=True)
            rows = np.sqrt(np.mean(out32 ** 2, axis=1))
            largest = np.unravel_index(np.argmax(summed), summed.shape)
            print(f"  sum of the bounds: largest {summed.max():.4g} (row {largest[0]}, whose rms is {rows[largest[0]]:.4g}); "
                  f"rows past the first 16: largest {summed[16:].max():.4g}; the last row's rms {rows[-1]:.4g}", flush=True)
            worst_sum = max(worst_sum, float(summed.max()))
    print("largest per intermediate over every draw: " + ", ".join(f"{n} {w:.4g}" for n, w in worst.items())
          + f" (their sum {sum(worst.values()):.4g})")
    print(f"largest sum of the {len(ROUNDED)} bounds at one output element, over every draw: {worst_sum:.4g}: "
          f"scale {worst_sum / len(ROUNDED):.4g} for each of the {len(ROUNDED)} summed intermediates")


if __name__ == "__main__":
    main()
