"""What proving a Pallas program costs the judge: program_identity.compare (decision coverage and the
data probe included) on every bundled starter, for two checkouts side by side.

    build/pallas-venv/bin/python bench/identity_cost.py --before OLD_CHECKOUT --after . --rounds 2

Each round runs one checkout's whole list in a new process, then the other's (alternating which goes
first); the figure per task is its smallest time over the rounds. The programs are traced at the
task's three size sets and round-tripped through the judge's artifact format first (untimed), as
the judge reads them.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys

_ONE_CHECKOUT = r"""
import json, pathlib, sys, time
root = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(root / "tpu_runner/pallas"))
import jax, jax.numpy as jnp
from kernelgym_pallas import artifact, program_identity, task_spec
out = {}
for starter in sorted(root.glob("datasets/suites/*/*/pallas/starter.py")):
    folder = starter.parent.parent
    task = task_spec.load_task(folder, "kernelgym", folder.parent.name)
    kernel = task_spec.load_function(starter, "kernel", f"starter_{folder.name}")
    programs = {}
    for name in ("small", "check", "full"):
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets[name].inputs]
        programs[name] = jax.make_jaxpr(kernel)(*args)
    programs = artifact.load(artifact.dump(programs, "starter.py"))
    sizes = {n: task.size_sets[n].sizes for n in ("small", "check", "full")}
    start = time.perf_counter()
    identity = program_identity.compare(programs, sizes)
    out[f"{folder.parent.name}/{folder.name}"] = [time.perf_counter() - start, bool(identity.proven)]
print(json.dumps(out))
"""


def _run(root: pathlib.Path, python: str) -> dict:
    done = subprocess.run([python, "-c", _ONE_CHECKOUT, str(root)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=pathlib.Path, required=True, help="a checkout (its source tree)")
    parser.add_argument("--after", type=pathlib.Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--python", default=sys.executable, help="a Python with jax (build/pallas-venv)")
    args = parser.parse_args()
    best = {"before": {}, "after": {}}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", args.after)]
        for label, root in (order if r % 2 == 0 else order[::-1]):
            for task, (seconds, proven) in _run(root.resolve(), args.python).items():
                old = best[label].get(task, (float("inf"), proven))
                best[label][task] = (min(old[0], seconds), proven)
    tasks = sorted(set(best["before"]) & set(best["after"]))
    print(f"{'task':50s} {'before s':>9s} {'after s':>9s} {'proven (before/after)':>22s}")
    for task in tasks:
        b, a = best["before"][task], best["after"][task]
        print(f"{task:50s} {b[0]:9.3f} {a[0]:9.3f} {str(b[1]) + '/' + str(a[1]):>22s}")
    before = [best["before"][t][0] for t in tasks]
    after = [best["after"][t][0] for t in tasks]
    print(f"{len(tasks)} starters: total {sum(before):.1f} s -> {sum(after):.1f} s; median {statistics.median(before):.3f} "
          f"-> {statistics.median(after):.3f} s; largest {max(before):.2f} -> {max(after):.2f} s; "
          f"proven {sum(best['before'][t][1] for t in tasks)} -> {sum(best['after'][t][1] for t in tasks)}")


if __name__ == "__main__":
    main()
