"""Input tensors drawn from a task's initializers, in numpy, deterministic given a seed.

The same kinds as the C++ runner's (tpu_runner/cpu/inputs.h): normal, uniform (optionally on a dyadic
grid), randint, permutation, partition. The values are not bit-identical to the C++ draws (a
different generator); what matters is that the server's seed fixes them, and that the candidate's
process cannot choose them: they are drawn before the candidate is imported.

Narrow dtypes (a Pallas version's bfloat16, float16, int8 ...): the values are drawn in float64
(integers in int64) and rounded once to the tensor's dtype (round to nearest even), so a
bfloat16 input holds the bfloat16 nearest to a draw from the stated distribution.
"""
from __future__ import annotations

import numpy as np

from .task_spec import TensorSpec


def draw(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(tuple(spec.shape), dtype=np.int64))
    return rounded(values(spec.init, n, rng), spec).reshape(tuple(spec.shape))


def values(init: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws from an initializer, in float64 (integers in int64), before rounding to a dtype."""
    kind = init["kind"]
    if kind == "normal":
        return rng.normal(init["mean"], init["std"], size=n)
    if kind == "uniform":
        low, high, step = init["low"], init["high"], init.get("step", 0.0)
        if step > 0:
            cells = int(np.floor((high - low) / step))
            return low + step * rng.integers(0, cells, size=n)
        return rng.uniform(low, high, size=n)
    if kind == "randint":
        return rng.integers(int(init["low"]), int(init["high"]), size=n)
    if kind == "permutation":
        return rng.permutation(int(init["high"]))[:n]
    if kind == "partition":
        total = int(init["total"])
        cuts = np.sort(rng.integers(0, total + 1, size=max(n - 1, 0)))
        return np.diff(np.concatenate([[0], cuts, [total]]))
    raise AssertionError(f"unknown initializer kind {kind!r}")  # the loader refuses other kinds


def rounded(drawn: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Draws rounded once to the tensor's dtype (a uniform's half-open interval kept)."""
    init = spec.init
    out = drawn.astype(spec.dtype)
    if init["kind"] == "uniform" and (np.issubdtype(out.dtype, np.floating) or str(out.dtype) == "bfloat16"):
        # rounding can land a value on `high`; keep the half-open interval honest
        out = np.where(out.astype(np.float64) >= init["high"], _below(init["high"], out.dtype), out)
        out = out.astype(spec.dtype)
    return out


def _below(high: float, dtype) -> np.ndarray:
    """The largest value of `dtype` that is smaller than `high`."""
    value = np.array(high, dtype=np.float64).astype(dtype)
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[value.dtype.itemsize]
    while float(value) >= high:
        as_int = value.view(bits)
        if float(value) > 0:
            as_int = as_int - 1
        elif float(value) == 0:
            as_int = np.array(np.iinfo(bits).min + 1, dtype=bits)  # -(smallest subnormal)
        else:
            as_int = as_int + 1
        value = np.asarray(as_int, dtype=bits).view(dtype)
    return value


def draw_all(specs: list[TensorSpec], seed: int) -> list[np.ndarray]:
    """One input set: every tensor from its own stream of `seed`."""
    return [draw(spec, np.random.default_rng([seed, index])) for index, spec in enumerate(specs)]
