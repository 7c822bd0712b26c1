"""Runs tasks' JAX references on inputs given as files: the test that holds every Pallas
version's reference to its task's TorchScript one (tests/integration/task_reference_test.cc).

    python -m kernelgym_pallas.run_reference JOBS.json

JOBS.json is a list of {"task_dir", "inputs": [{"file", "dtype", "shape"}], "out_prefix"}; for
each job one JSON line goes to stdout: {"task_dir", "outputs": [{"file", "dtype", "shape"}]} or
{"task_dir", "error"}. Trusted code only (task references): no sandbox, no seccomp.
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np


def main() -> int:
    import jax
    from . import evaluation, task_spec
    jobs = json.loads(pathlib.Path(sys.argv[1]).read_text())
    for index, job in enumerate(jobs):
        task_dir = pathlib.Path(job["task_dir"])
        try:
            reference = task_spec.load_function(task_dir / "pallas" / "reference.py", "reference",
                                                f"kernelgym_reference_{index}")
            inputs = [np.fromfile(i["file"], dtype=i["dtype"]).reshape(i["shape"]) for i in job["inputs"]]
            outputs = [evaluation._wire(np.asarray(o)) for o in evaluation._as_tuple(jax.jit(reference)(*inputs))]
            entries = []
            for k, array in enumerate(outputs):
                path = f"{job['out_prefix']}_{k}.bin"
                np.ascontiguousarray(array).tofile(path)
                entries.append({"file": path, "dtype": str(array.dtype), "shape": list(array.shape)})
            print(json.dumps({"task_dir": str(task_dir), "outputs": entries}), flush=True)
        except Exception as error:  # one task's failure is that task's result, not the run's
            print(json.dumps({"task_dir": str(task_dir), "error": f"{type(error).__name__}: {error}"[:500]}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
