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
# The dtypes task.json may name (the C++ loader accepts the same four).
_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


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

    def reference(self) -> Callable:
        if self.layout == "jaxbench":
            return self.jaxbench_module.workload
        return load_function(self.reference_path, "reference", "kernelgym_task_reference")

    def draw_inputs(self, size_set: str, seed: int) -> list[np.ndarray]:
        if self.layout == "jaxbench":
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


def _tensor(entry: dict, sizes: dict[str, int], where: str, init: dict | None, tol: dict) -> TensorSpec:
    dtype = _DTYPES.get(entry.get("dtype", "float32"))
    if dtype is None:
        raise TaskError(f"{where}: dtype {entry.get('dtype')!r} is not one of {sorted(_DTYPES)}")
    shape = [int(_resolve(d, sizes, f"{where}.shape")) for d in entry["shape"]]
    resolved_init = None
    if init is not None:
        resolved_init = {k: v if k == "kind" else _resolve(v, sizes, f"{where}.init.{k}") for k, v in init.items()}
        if resolved_init["kind"] == "permutation":
            resolved_init.setdefault("high", int(np.prod(shape, dtype=np.int64)))
    return TensorSpec(entry["name"], np.dtype(dtype), shape, resolved_init,
                      float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0)))


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
            inputs.append(_tensor(entry, sizes, f"{pallas_json}: inputs.{entry['name']}", init, {}))
        outputs = []
        for entry in task["outputs"]:
            tol = output_overrides.get(entry["name"], {}).get("tolerance", entry.get("tolerance", base_tol))
            outputs.append(_tensor(entry, sizes, f"{pallas_json}: outputs.{entry['name']}", None, tol))
        flops = float(pallas.get("flops", {}).get(set_name, 0.0)) if isinstance(pallas.get("flops"), dict) else 0.0
        sets[set_name] = ShapeSet(dict(sizes), inputs, outputs, flops)
    return PallasTask(task["id"], "kernelgym", pallas_dir / "reference.py", pallas_dir / "starter.py", sets)


# ---- JAXBench layout ---------------------------------------------------------------------------

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
    import jax
    inputs = _jaxbench_inputs(module, 0)
    reference_out = jax.eval_shape(module.workload, *inputs)
    outs = reference_out if isinstance(reference_out, (tuple, list)) else (reference_out,)
    tol = getattr(module, "TOLERANCE", None) or module.CONFIG.get("tolerance", {"atol": 1e-2, "rtol": 1e-2})
    in_specs = [TensorSpec(f"in{i}", np.dtype(x.dtype), list(x.shape)) for i, x in enumerate(inputs)]
    out_specs = [TensorSpec(f"out{i}", np.dtype(o.dtype), list(o.shape), None, tol["atol"], tol["rtol"])
                 for i, o in enumerate(outs)]
    flops = float(module.get_flops()) if hasattr(module, "get_flops") else 0.0
    shape_set = ShapeSet({}, in_specs, out_specs, flops)
    starter = case_dir / "starter.py"
    return PallasTask(f"{suite}/{case_dir.name}", "jaxbench", baseline, starter if starter.is_file() else None,
                      {"small": shape_set, "check": shape_set, "full": shape_set}, module)


def _jaxbench_inputs(module, seed: int) -> list[np.ndarray]:
    """create_inputs() or create_inputs(key): JAXBench cases draw from a JAX PRNG key."""
    import jax
    params = inspect.signature(module.create_inputs).parameters
    made = module.create_inputs(jax.random.PRNGKey(seed % (1 << 31))) if params else module.create_inputs()
    made = made if isinstance(made, (tuple, list)) else (made,)
    return [np.asarray(x) for x in made]


def load_task(task_dir: pathlib.Path, layout: str = "kernelgym", suite: str = "jaxbench-ext") -> PallasTask:
    if layout == "jaxbench":
        return load_jaxbench_task(task_dir, suite)
    return load_kernelgym_task(task_dir)
