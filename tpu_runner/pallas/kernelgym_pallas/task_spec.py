"""What the worker needs to know about a task, loaded from one of two layouts.

* kernelgym's own (datasets/suites/<suite>/<name>/): task.json gives the tensors, initializers and
  tolerances; the `pallas/` subfolder gives pallas.json (the size sets), reference.py (JAX) and
  starter.py (a naive Pallas kernel). docs/task_format.md describes both files.
* JAXBench's (benchmark/<id>/baseline.py with CONFIG, create_inputs, workload, get_flops): inputs
  come from create_inputs, the reference is workload. See docs/pallas.md, "JAXBench layout".

Size sets: "small" and "check" are what correctness is checked on (in interpret mode without a
TPU); they differ in at least one size, so a kernel that hard-codes one shape fails the other.
"full" is the original TPU-scale problem that is compiled for the TPU target and timed (and
checked) on a TPU host.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import pathlib
import sys
from typing import Any, Callable

import numpy as np

SIZE_SETS = ("small", "check", "full")
# The dtypes task.json may name (the C++ loader accepts the same four): the cpu version's.
_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


def _ml_dtype(name: str):
    import ml_dtypes  # a dependency of jax: always in the pallas venv
    return np.dtype(getattr(ml_dtypes, name))


# The dtypes a Pallas version may give an input instead (pallas.json "inputs": {name: {"dtype"}}):
# what JAX TPU kernels take. Outputs: the float ones and int32, which reach the runner as float32
# (bfloat16/float16) or as they are (evaluation._wire); the C++ loader accepts the same lists.
TPU_INPUT_DTYPES = ("float32", "bfloat16", "float16", "int8", "uint8", "int32")
TPU_OUTPUT_DTYPES = ("float32", "bfloat16", "float16", "int32")


def tpu_dtype(name: str):
    return _ml_dtype(name) if name == "bfloat16" else np.dtype(name)


def unit_roundoff(dtype) -> float:
    """u = 2^-p for a float dtype with p significand bits (bfloat16: p = 8, u = 2^-8; float16:
    p = 11; float32: p = 24): round-to-nearest moves a value by at most u of its magnitude."""
    import ml_dtypes
    return float(ml_dtypes.finfo(dtype).eps) / 2.0


class TaskError(Exception):
    """A task folder that cannot be used; the message names the file and the field."""


@dataclasses.dataclass
class TensorSpec:
    name: str
    dtype: Any  # a numpy dtype
    shape: list[int]
    init: dict | None = None  # inputs only; every bound resolved to a number
    atol: float = 0.0         # outputs only
    rtol: float = 0.0


@dataclasses.dataclass
class ShapeSet:
    sizes: dict[str, int]
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    flops: float = 0.0  # per call; 0 when the task does not say (the worker then asks XLA)


@dataclasses.dataclass
class PallasTask:
    task_id: str
    layout: str  # "kernelgym" or "jaxbench"
    reference_path: pathlib.Path
    starter_path: pathlib.Path | None
    size_sets: dict[str, ShapeSet]
    # jaxbench layout only: the module that makes inputs (create_inputs) for each size set
    jaxbench_module: Any = None
    # Sizes that cannot take a value of their own in every set, with the reason (pallas.json
    # "size_exemptions"): one derived from another (OH = H - 2), or a literal extent in task.json.
    size_exemptions: dict = dataclasses.field(default_factory=dict)
    # jaxbench layout only: how its checked sets were made ("scaled", "doubled" or "full")
    jaxbench_scaling: str = ""

    def reference(self) -> Callable:
        if self.layout == "jaxbench":
            return _jaxbench_reference(self)
        return load_function(self.reference_path, "reference", "kernelgym_task_reference")

    def draw_inputs(self, size_set: str, seed: int) -> list[np.ndarray]:
        if self.layout == "jaxbench":
            with _Config(self.jaxbench_module, self.size_sets[size_set].sizes):
                return _jaxbench_inputs(self.jaxbench_module, seed)
        from .inputs import draw_all
        return draw_all(self.size_sets[size_set].inputs, seed)


def load_function(path: pathlib.Path, name: str, module_name: str) -> Callable:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise TaskError(f"{path}: defines no function `{name}`")
    return fn


def _resolve(value, sizes: dict[str, int], where: str):
    if isinstance(value, str):
        if value not in sizes:
            raise TaskError(f"{where}: `{value}` is not a size of the task")
        return sizes[value]
    return value


def _tensor(entry: dict, sizes: dict[str, int], where: str, init: dict | None, tol: dict,
            dtype_override: str | None = None, allowed: tuple = ()) -> TensorSpec:
    if dtype_override is not None:
        if dtype_override not in allowed:
            raise TaskError(f"{where}.dtype: {dtype_override!r} is not one of {list(allowed)}")
        dtype = tpu_dtype(dtype_override)
    else:
        dtype = _DTYPES.get(entry.get("dtype", "float32"))
    if dtype is None:
        raise TaskError(f"{where}: dtype {entry.get('dtype')!r} is not one of {sorted(_DTYPES)}")
    shape = [int(_resolve(d, sizes, f"{where}.shape")) for d in entry["shape"]]
    resolved_init = None
    if init is not None:
        resolved_init = {k: v if k == "kind" else _resolve(v, sizes, f"{where}.init.{k}") for k, v in init.items()}
        if resolved_init["kind"] == "permutation":
            resolved_init.setdefault("high", int(np.prod(shape, dtype=np.int64)))
    if resolved_init is not None:
        _check_init_fits(resolved_init, np.dtype(dtype), f"{where}.init")
    return TensorSpec(entry["name"], np.dtype(dtype), shape, resolved_init,
                      float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0)))


def _is_float(dtype) -> bool:
    return dtype.kind == "f" or str(dtype) == "bfloat16"


def _check_init_fits(init: dict, dtype, where: str) -> None:
    """An initializer must be drawable in its dtype without wrapping or silent change: integer
    bounds inside the dtype's range; a uniform grid (`step`) exactly representable (the grids
    exist so that sums are exact in any order, which a rounded grid would break)."""
    kind = init["kind"]
    if kind in ("randint", "permutation", "partition") and not _is_float(dtype):
        info = np.iinfo(dtype)
        top = init.get("high", init.get("total", 0)) - (1 if kind != "partition" else 0)
        if init.get("low", 0) < info.min or top > info.max:
            raise TaskError(f"{where}: values up to {top} do not fit {dtype} ({info.min}..{info.max})")
    if kind == "uniform" and init.get("step", 0) and _is_float(dtype) and np.dtype(dtype).itemsize < 4:
        low, step = float(init["low"]), float(init["step"])
        cells = int(np.floor((float(init["high"]) - low) / step))
        grid = low + step * np.arange(cells, dtype=np.float64)
        if not np.array_equal(grid.astype(np.float32).astype(dtype).astype(np.float64), grid):
            raise TaskError(f"{where}: the grid low + k * step is not exactly representable in {dtype}")


def derive_tolerance(base: dict, dtype, rounded: dict | None = None) -> tuple[float, float]:
    """The tolerance of an output computed in narrow dtypes (docs/task_format.md, "dtypes").

    `base` is the float32 tolerance of the same computation (task.json's, or pallas.json's
    override): with bfloat16/float16 operands every product is exact in float32 (8 + 8 or 11 + 11
    significand bits fit in 24), so an f32-accumulated contraction of narrow inputs makes no
    rounding error the float32 task does not already make. What is new is rounding to the narrow
    dtype, with eps = 2^(1-p) (one ulp at 1; bfloat16 2^-7, float16 2^-10): the reference and a
    correct kernel each round a value, and may land one ulp apart.

    * the output itself, in a narrow float dtype: + eps relative;
    * `rounded["relative"]` intermediates the workload rounds that reach the output through
      products and quotients only (a normalized row before the scale): + eps relative each;
    * `rounded["summed"]` intermediates that feed a sum (attention probabilities before P.V, a
      hidden activation before the down projection): a one-ulp difference in each term, with
      independent signs, moves the sum by eps * sqrt(sum of squared terms) / sqrt(3) in standard
      deviation; `rounded["scale"]` is 6 such deviations in units of eps (3.5 x the root sum of
      squares of the terms at the checked sizes, which the task derives from its inputs'
      distributions and states): + eps * scale absolute each.

    Nothing is added for a float32 output of float32 work."""
    atol, rtol = float(base.get("atol", 0.0)), float(base.get("rtol", 0.0))
    rounded = rounded or {}
    narrow = _is_float(np.dtype(dtype)) and np.dtype(dtype).itemsize < 4
    if not narrow and not rounded:
        return atol, rtol
    eps_dtype = rounded.get("dtype", str(dtype) if narrow else "bfloat16")
    eps = 2.0 * unit_roundoff(tpu_dtype(eps_dtype))
    rtol += eps * ((1 if narrow else 0) + int(rounded.get("relative", 0)))
    atol += eps * int(rounded.get("summed", 0)) * float(rounded.get("scale", 0.0))
    return atol, rtol


_INPUT_FIELDS = ("init", "dtype")
_OUTPUT_FIELDS = ("tolerance", "dtype", "rounded")
_ROUNDED_FIELDS = ("relative", "summed", "scale", "dtype")


def _check_overrides(path: pathlib.Path, kind: str, overrides, names: list[str], fields: tuple) -> None:
    """A misspelt tensor or field would silently leave the task as it was: refused instead."""
    if not isinstance(overrides, dict):
        raise TaskError(f"{path}: {kind}: must be an object (tensor name -> overrides)")
    for name, override in overrides.items():
        if name not in names:
            raise TaskError(f"{path}: {kind}.{name}: not one of the task's {kind} {names}")
        if not isinstance(override, dict) or not set(override) <= set(fields):
            raise TaskError(f"{path}: {kind}.{name}: an object with some of the fields {list(fields)}")


def load_kernelgym_task(task_dir: pathlib.Path) -> PallasTask:
    task_json = task_dir / "task.json"
    pallas_dir = task_dir / "pallas"
    pallas_json = pallas_dir / "pallas.json"
    for required in (task_json, pallas_json, pallas_dir / "reference.py", pallas_dir / "starter.py"):
        if not required.is_file():
            raise TaskError(f"{required}: missing")
    task = json.loads(task_json.read_text())
    pallas = json.loads(pallas_json.read_text())
    size_names = [s["name"] for s in task["sizes"]]
    base_tol = pallas.get("tolerance", task["tolerance"])
    input_overrides = pallas.get("inputs", {})
    output_overrides = pallas.get("outputs", {})
    _check_overrides(pallas_json, "inputs", input_overrides, [e["name"] for e in task["inputs"]], _INPUT_FIELDS)
    _check_overrides(pallas_json, "outputs", output_overrides, [e["name"] for e in task["outputs"]], _OUTPUT_FIELDS)
    sets = {}
    for set_name in SIZE_SETS:
        sizes = pallas.get("sizes", {}).get(set_name)
        if not isinstance(sizes, dict) or sorted(sizes) != sorted(size_names):
            raise TaskError(f"{pallas_json}: sizes.{set_name}: must give exactly the task's sizes {size_names}")
        inputs = []
        for entry in task["inputs"]:
            override = input_overrides.get(entry["name"], {})
            init = override.get("init", entry["init"])
            if "kind" not in init:  # one initializer per size set; "check" takes "small"'s unless it has one
                init = init.get(set_name) or init.get("small") or init
            inputs.append(_tensor(entry, sizes, f"{pallas_json}: inputs.{entry['name']}", init, {},
                                  override.get("dtype"), TPU_INPUT_DTYPES))
        outputs = []
        for entry in task["outputs"]:
            override = output_overrides.get(entry["name"], {})
            tol = override.get("tolerance", entry.get("tolerance", base_tol))
            where = f"{pallas_json}: outputs.{entry['name']}"
            spec = _tensor(entry, sizes, where, None, tol, override.get("dtype"), TPU_OUTPUT_DTYPES)
            rounded = override.get("rounded", {})
            if not isinstance(rounded, dict) or not set(rounded) <= set(_ROUNDED_FIELDS) or \
                    rounded.get("dtype", "bfloat16") not in ("bfloat16", "float16"):
                raise TaskError(f"{where}.rounded: an object with some of {list(_ROUNDED_FIELDS)} (dtype bfloat16 "
                                "or float16)")
            spec.atol, spec.rtol = derive_tolerance(tol, spec.dtype, rounded)
            outputs.append(spec)
        flops = float(pallas.get("flops", {}).get(set_name, 0.0)) if isinstance(pallas.get("flops"), dict) else 0.0
        sets[set_name] = ShapeSet(dict(sizes), inputs, outputs, flops)
    exemptions = pallas.get("size_exemptions", {})
    if not isinstance(exemptions, dict) or any(n not in size_names or not isinstance(r, str) or not r.strip()
                                               for n, r in exemptions.items()):
        raise TaskError(f"{pallas_json}: size_exemptions: an object of the task's size names -> the reason")
    return PallasTask(task["id"], "kernelgym", pallas_dir / "reference.py", pallas_dir / "starter.py", sets,
                      size_exemptions=dict(exemptions))


# ---- JAXBench layout ---------------------------------------------------------------------------
#
# A JAXBench case has one shape, its CONFIG's, which is "full". The checked sets are made by
# scaling CONFIG's large integer entries down (docs/pallas.md, "JAXBench layout"): an entry of at
# least 512 that 256 divides is a size; in CONFIG's order the sizes take the pairs below (small,
# check) in units of 128 lanes, so every checked size is a multiple of 128 and each size's ratio
# check/small brings a prime of its own (3/2, 5/4, 7/4, 11/8, 13/8, ...). A batch entry goes to 1
# and 2; head counts are divided by a common power of two (at most 8), the same at both sets.
# Other smaller entries (experts, a head dimension, a page size) and entries the pair would not
# shrink stay as they are.
# create_inputs and workload read CONFIG when they run, so CONFIG holds a set's values while its
# inputs are made and while the workload is traced at its shapes. A scaling the case's code
# refuses (eval_shape raises) falls back to doubling (every ratio 2), then to the full shape alone.

_JAXBENCH_QUANTUM = 128
_JAXBENCH_PAIRS = [(2, 3), (4, 5), (4, 7), (8, 11), (8, 13), (16, 17), (16, 19), (16, 23)]
_JAXBENCH_SKIP = ("name", "model", "operator", "direction", "dtype", "tolerance")


def _jaxbench_sizes(config: dict) -> list[str]:
    return [k for k, v in config.items() if k not in _JAXBENCH_SKIP and isinstance(v, int)
            and not isinstance(v, bool) and v >= 512 and v % 256 == 0]


def _jaxbench_counts(config: dict) -> tuple[dict, dict]:
    """A batch entry goes to 1 (small) and 2 (check); head-count entries are divided by one power of
    two (at most 8) that divides them all, the same at both sets, so their ratios (the GQA group)
    stay."""
    ints = {k: v for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool) and v < 512}
    small, check = {}, {}
    for k, v in ints.items():
        if "batch" in k and v >= 3:
            small[k], check[k] = 1, 2
    heads = {k: v for k, v in ints.items() if "heads" in k and v > 1}
    g = 8
    while heads and g > 1 and any(v % g or v // g < 1 for v in heads.values()):
        g //= 2
    if heads and g > 1:
        for k, v in heads.items():
            small[k] = check[k] = v // g
    return small, check


def _jaxbench_plans(config: dict) -> list[tuple[str, dict, dict]]:
    """(how, small, check) scalings to try, best first."""
    names = _jaxbench_sizes(config)
    small, check = _jaxbench_counts(config)
    for name, (a, b) in zip(names, _JAXBENCH_PAIRS):
        if _JAXBENCH_QUANTUM * b < config[name]:
            small[name], check[name] = _JAXBENCH_QUANTUM * a, _JAXBENCH_QUANTUM * b
    doubled_small = {n: config[n] // 8 for n in names if config[n] // 8 >= _JAXBENCH_QUANTUM}
    doubled = {n: 2 * v for n, v in doubled_small.items()}
    plans = [("scaled", small, check), ("doubled", doubled_small, doubled), ("full", {}, {})]
    return [plan for plan in plans if plan[0] == "full" or plan[1]]


class _Config:
    """CONFIG holding a size set's values for the duration of a block."""

    def __init__(self, module, values: dict):
        self.module, self.values, self.saved = module, values, {}

    def __enter__(self):
        self.saved = {k: self.module.CONFIG[k] for k in self.values}
        self.module.CONFIG.update(self.values)

    def __exit__(self, *exc):
        self.module.CONFIG.update(self.saved)


def load_jaxbench_task(case_dir: pathlib.Path, suite: str) -> PallasTask:
    baseline = case_dir / "baseline.py"
    if not baseline.is_file():
        raise TaskError(f"{baseline}: missing")
    module_name = f"kernelgym_jaxbench_{case_dir.name}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, baseline)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    for name in ("CONFIG", "create_inputs", "workload"):
        if not hasattr(module, name):
            raise TaskError(f"{baseline}: defines no `{name}` (the JAXBench layout needs CONFIG, create_inputs, workload)")
    if not isinstance(module.CONFIG, dict):
        raise TaskError(f"{baseline}: CONFIG is not a dict")
    tol = getattr(module, "TOLERANCE", None) or module.CONFIG.get("tolerance", {"atol": 1e-2, "rtol": 1e-2})
    flops = float(module.get_flops()) if hasattr(module, "get_flops") else 0.0
    full_values = dict(module.CONFIG)
    full = _jaxbench_shape_set(module, {}, tol, flops)
    for how, small_values, check_values in _jaxbench_plans(full_values):
        if how == "full":
            sets = {"small": full, "check": full, "full": full}
            break
        try:
            sets = {"small": _jaxbench_shape_set(module, small_values, tol, 0.0),
                    "check": _jaxbench_shape_set(module, check_values, tol, 0.0), "full": full}
        except Exception:  # the case's code does not take this scaling: the next plan
            continue
        shapes = {name: [tuple(t.shape) for t in sets[name].inputs] for name in sets}
        if shapes["small"] == shapes["full"] or shapes["check"] == shapes["full"] or shapes["small"] == shapes["check"]:
            continue  # create_inputs does not read CONFIG's sizes: scaling them changes nothing
        sets["small"].sizes, sets["check"].sizes = dict(small_values), dict(check_values)
        break
    sets["full"].sizes = {k: full_values[k] for k in sets["small"].sizes}
    starter = case_dir / "starter.py"
    task = PallasTask(f"{suite}/{case_dir.name}", "jaxbench", baseline, starter if starter.is_file() else None,
                      sets, module)
    task.jaxbench_scaling = how
    return task


def _jaxbench_shape_set(module, values: dict, tol: dict, flops: float) -> ShapeSet:
    import jax
    with _Config(module, values):
        inputs = _jaxbench_input_specs(module)
        reference_out = jax.eval_shape(module.workload, *inputs)
    outs = reference_out if isinstance(reference_out, (tuple, list)) else (reference_out,)
    in_specs = [TensorSpec(f"in{i}", np.dtype(x.dtype), list(x.shape)) for i, x in enumerate(inputs)]
    out_specs = [TensorSpec(f"out{i}", np.dtype(o.dtype), list(o.shape), None, tol["atol"], tol["rtol"])
                 for i, o in enumerate(outs)]
    return ShapeSet(dict(values), in_specs, out_specs, flops)


def _jaxbench_set_of(task: PallasTask, args) -> str:
    shapes = [tuple(getattr(a, "shape", ())) for a in args]
    for name in ("small", "check", "full"):
        if shapes == [tuple(s.shape) for s in task.size_sets[name].inputs]:
            return name
    return "full"


def _jaxbench_reference(task: PallasTask) -> Callable:
    """The case's workload, traced with CONFIG at the size set its arguments' shapes belong to."""
    module = task.jaxbench_module

    def workload(*args):
        values = task.size_sets[_jaxbench_set_of(task, args)].sizes
        with _Config(module, values):
            return module.workload(*args)
    return workload


def _jaxbench_input_specs(module) -> list:
    """The inputs' shapes and dtypes without making them (a full-size case's inputs are GBs), or
    the inputs themselves where create_inputs cannot be traced."""
    import jax
    try:
        made = jax.eval_shape(lambda: _jaxbench_call(module, 0))
    except Exception:
        made = _jaxbench_call(module, 0)
    return list(made)


def _jaxbench_call(module, seed: int):
    import jax
    params = list(inspect.signature(module.create_inputs).parameters.values())
    wants_key = params and (params[0].name in ("key", "rng", "prng_key") or params[0].default is inspect.Parameter.empty)
    made = module.create_inputs(jax.random.PRNGKey(seed % (1 << 31))) if wants_key else module.create_inputs()
    return made if isinstance(made, (tuple, list)) else (made,)


def _jaxbench_inputs(module, seed: int) -> list[np.ndarray]:
    """create_inputs(), or create_inputs(key) when its first parameter is a PRNG key (named key,
    rng or prng_key, or without a default): JAXBench's own cases take a dtype with a default
    and draw from a fixed key, so their inputs do not follow the server's seeds."""
    return [np.asarray(x) for x in _jaxbench_call(module, seed)]


def load_task(task_dir: pathlib.Path, layout: str = "kernelgym", suite: str = "jaxbench-ext") -> PallasTask:
    if layout == "jaxbench":
        return load_jaxbench_task(task_dir, suite)
    return load_kernelgym_task(task_dir)
