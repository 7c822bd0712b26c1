#!/usr/bin/env python3
"""Every bundled Pallas starter's interpret-mode program (the judge's correctness check off a TPU)
compiled by XLA for the CPU at its default optimization level and at level 0: the compile's CPU
seconds both ways, and whether the outputs' bits agree (docs/benchmarks.md, "Where an
interpret-mode check's time goes").

    build/pallas-venv/bin/python bench/interpret_opt_level.py
"""
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tpu_runner/pallas"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax._src import core  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import jaxpr_check, task_spec, tpu_numerics  # noqa: E402


def main() -> None:
    differing, programs, default_s, level0_s = [], 0, 0.0, 0.0
    for starter in sorted(ROOT.glob("datasets/suites/*/*/pallas/starter.py")):
        folder = starter.parent.parent
        task = task_spec.load_task(folder, "kernelgym", folder.parent.name)
        kernel = task_spec.load_function(starter, "kernel", f"starter_{folder.name}")
        for set_name in ("small", "check"):
            inputs = task.draw_inputs(set_name, 11)
            program = jax.make_jaxpr(kernel)(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs])
            mode = pltpu.InterpretParams(detect_races=True, out_of_bounds_reads="raise", uninitialized_memory="nan")
            fn = jax.jit(core.jaxpr_as_fun(jaxpr_check.set_interpret(tpu_numerics.as_on_tpu(program), mode)))
            lowered = fn.lower(*inputs)
            start = time.process_time()
            default = lowered.compile()
            middle = time.process_time()
            level0 = lowered.compile(compiler_options={"xla_backend_optimization_level": 0})
            default_s += middle - start
            level0_s += time.process_time() - middle
            a, b = jax.tree.leaves(default(*inputs)), jax.tree.leaves(level0(*inputs))
            programs += 1
            if not all(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)) for x, y in zip(a, b)):
                differing.append(f"{folder.parent.name}/{folder.name}:{set_name}")
    print(f"{programs} programs; compile CPU s: default {default_s:.1f}, level 0 {level0_s:.1f}")
    print(f"other bits at level 0 in {len(differing)}: {', '.join(differing)}")


if __name__ == "__main__":
    main()
