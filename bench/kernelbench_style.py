#!/usr/bin/env python3
"""One evaluation the way a KernelBench-style harness does it, for comparison (docs/benchmarks.md).

The baseline of issue #35's first target: a cold kernelgym evaluation of a new small kernel
against what a KernelBench-style harness pays for the same task and the same kernel. Written from
how such a harness works, not from its code:

  - a fresh Python process that imports torch;
  - the candidate is a Python module (`ModelNew`) whose import builds its C++ with
    torch.utils.cpp_extension.load_inline into a build folder of its own, so a new kernel is a
    cold build of a torch extension (torch/extension.h and pybind11 bindings included);
  - the reference is an nn.Module (`Model`) with `get_inputs()` drawing random inputs;
  - correctness: a few trials, each with its own seed, outputs compared with torch.allclose;
  - timing: warm-up calls, then 100 timed calls of each model, the mean reported (a CUDA harness
    brackets each call with CUDA events; on cpu a call is synchronous, so time.perf_counter).

Both modules are made here from the kernelgym task: `Model` calls the task's reference.py; the
candidate's C++ is the kernel's source plus the binding a KernelBench candidate writes itself
(tensors in, output tensor allocated, sizes from the inputs' shapes), with the compile flags
kernelgym uses. Tolerances are the task's (a KernelBench harness uses 1e-2).

  build/python-venv/bin/python bench/kernelbench_style.py --task-dir datasets/suites/cpu/silu_mul \\
      --kernel tests/honest/silu_mul_avx2/kernel.cpp

Prints one JSON object: status, speedup, and the seconds of each stage. Needs torch (the pinned
PyPI wheel of python/'s venv, scripts/python_venv.sh), g++, ninja and Python's headers.
"""
import argparse
import json
import re
import textwrap
import sys
import tempfile
import time
import uuid
from pathlib import Path

START = time.perf_counter()


def candidate_module_source(task, kernel_source):
    """The Python source of a KernelBench-style candidate: C++ inline, built when imported."""
    params = re.fullmatch(r"\s*void\s+kernel\s*\((.*)\)\s*", task["signature"])
    if not params:
        raise SystemExit(f"cannot read the signature {task['signature']!r}")
    shapes = {t["name"]: t["shape"] for t in task["inputs"]}
    outputs = {t["name"]: t["shape"] for t in task["outputs"]}
    if len(outputs) != 1:
        raise SystemExit("only tasks with one output are supported")
    args, inputs, sizes = [], [], {}
    for param in params.group(1).split(","):
        m = re.fullmatch(r"\s*(const\s+float\s*\*|float\s*\*|int64_t)\s*(\w+)\s*", param)
        if not m:
            raise SystemExit(f"unsupported parameter {param!r} (float32 pointers and int64_t sizes only)")
        kind, name = re.sub(r"\s+", "", m.group(1)), m.group(2)
        if kind == "constfloat*":
            inputs.append(name)
            args.append(f"{name}.data_ptr<float>()")
        elif kind == "float*":
            args.append(f"{name}.data_ptr<float>()")
        else:  # a size: read from the first input that has it in its shape, as a candidate does
            owner = next((i for i in inputs if name in shapes[i]), None)
            if owner is None:
                raise SystemExit(f"size {name} is in no input's shape")
            sizes[name] = f"{owner}.size({shapes[owner].index(name)})"
            args.append(name)
    (out_name, out_shape), = outputs.items()
    flags = task.get("compile_flags", ["-O3", "-march=native", "-fopenmp"])  # kernelgym's default
    checks = "\n".join(f'  TORCH_CHECK({i}.is_contiguous() && {i}.scalar_type() == torch::kFloat32, "{i}");'
                       for i in inputs)
    cpp = (kernel_source + "\n\ntorch::Tensor forward(" + ", ".join(f"torch::Tensor {i}" for i in inputs) + ") {\n"
           + checks + "\n"
           + "".join(f"  const int64_t {n} = {e};\n" for n, e in sizes.items())
           + f"  torch::Tensor {out_name} = torch::empty({{{', '.join(out_shape)}}}, {inputs[0]}.options());\n"
           + f"  kernel({', '.join(args)});\n  return {out_name};\n}}\n")
    return f'''
import torch
from torch.utils.cpp_extension import load_inline

cpp_source = {cpp!r}
module = load_inline(name=NAME, cpp_sources=[cpp_source], functions=["forward"],
                     extra_cflags={flags!r}, extra_ldflags={["-fopenmp"] if "-fopenmp" in flags else []!r},
                     build_directory=BUILD_DIRECTORY, verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, *inputs):
        return module.forward(*inputs)
'''


def reference_module_source(task, reference_source):
    """The Python source of a KernelBench-style reference: Model, get_inputs, get_init_inputs."""
    sizes = {s["name"]: s["value"] for s in task["sizes"]}
    draws = []
    for t in task["inputs"]:
        if t["dtype"] != "float32":
            raise SystemExit(f"input {t['name']}: only float32 inputs are supported")
        shape = [sizes[d] for d in t["shape"]]
        init = t.get("init", {"kind": "normal", "mean": 0.0, "std": 1.0})
        if init["kind"] == "normal":
            draws.append(f"torch.randn({shape}) * {init['std']} + {init['mean']}")
        elif init["kind"] == "uniform":
            draws.append(f"torch.rand({shape}) * {init['high'] - init['low']} + {init['low']}")
        else:
            raise SystemExit(f"input {t['name']}: init {init['kind']!r} is not supported")
    return f'''
import torch
from torch import Tensor


class _Ops:
    """torch as kernelgym's TorchScript references see it: ops such as torch.silu, which eager
    Python has only under torch.ops.aten, resolve there."""

    def __getattr__(self, name):
        return getattr(torch, name) if hasattr(torch, name) else getattr(torch.ops.aten, name)


def reference_namespace():
    torch = _Ops()

{textwrap.indent(reference_source, "    ")}
    return reference


reference = reference_namespace()

class Model(torch.nn.Module):
    def forward(self, *inputs):
        return reference(*inputs)


def get_inputs():
    return [{", ".join(draws)}]


def get_init_inputs():
    return []
'''


def time_calls(fn, inputs, warmup, trials):
    for _ in range(warmup):
        fn(*inputs)
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - start)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task-dir", required=True, help="a cpu task's folder (task.json, reference.py)")
    p.add_argument("--kernel", required=True, help="the candidate's C++ (the task's extern \"C\" kernel)")
    p.add_argument("--build-root", default=None, help="where the fresh build folder goes (default: a temporary one)")
    p.add_argument("--correct-trials", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--perf-trials", type=int, default=100)
    a = p.parse_args()

    task_dir = Path(a.task_dir)
    task = json.loads((task_dir / "task.json").read_text())
    stages = {}
    mark = time.perf_counter()

    def stage(name):
        nonlocal mark
        now = time.perf_counter()
        stages[name] = now - mark
        mark = now

    ref_ns, new_ns = {}, {"NAME": f"kb_{uuid.uuid4().hex[:12]}"}
    exec(compile(reference_module_source(task, (task_dir / "reference.py").read_text()), "reference", "exec"), ref_ns)
    import torch  # already imported by the reference module; named here for this function
    torch.set_num_threads(int(task.get("threads", 1)))
    stage("import_torch")

    with tempfile.TemporaryDirectory(dir=a.build_root) as build:
        new_ns["BUILD_DIRECTORY"] = build  # fresh: nothing of an earlier build to reuse
        exec(compile(candidate_module_source(task, Path(a.kernel).read_text()), "candidate", "exec"), new_ns)
        stage("build")
        model, model_new = ref_ns["Model"](*ref_ns["get_init_inputs"]()), new_ns["ModelNew"]()
        tol = task.get("tolerance", {})
        atol, rtol = tol.get("atol", 1e-2), tol.get("rtol", 1e-2)
        torch.manual_seed(42)
        seeds = [int(s) for s in torch.randint(0, 2**31 - 1, (a.correct_trials,))]
        correct, message = True, ""
        with torch.no_grad():
            for seed in seeds:
                torch.manual_seed(seed)
                inputs = ref_ns["get_inputs"]()
                expected, actual = model(*inputs), model_new(*inputs)
                if expected.shape != actual.shape:
                    correct, message = False, f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
                    break
                if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
                    correct = False
                    message = f"max abs error {(actual - expected).abs().max().item():.3g} (seed {seed})"
                    break
            stage("correctness")
            result = {"status": "ok" if correct else "incorrect", "message": message}
            if correct:
                torch.manual_seed(seeds[0])
                inputs = ref_ns["get_inputs"]()
                ref_times = time_calls(model, inputs, a.warmup, a.perf_trials)
                new_times = time_calls(model_new, inputs, a.warmup, a.perf_trials)
                stage("timing")
                ref_mean, new_mean = sum(ref_times) / len(ref_times), sum(new_times) / len(new_times)
                result.update(reference_mean_ms=ref_mean * 1e3, candidate_mean_ms=new_mean * 1e3,
                              speedup=ref_mean / new_mean)
    stages["total_in_process"] = time.perf_counter() - START
    result["stage_seconds"] = stages
    print(json.dumps(result))
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
