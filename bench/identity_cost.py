"""What proving a Pallas program costs the judge: program_identity.compare (decision coverage and the
data probe included) on every bundled starter, for two checkouts side by side; or, with `--rule
layout`, layout_cuts.problems (the layout outside the kernels and, with decision_coverage's facts
computed untimed first, prefix_reads), for one checkout or two.

    build/pallas-venv/bin/python bench/identity_cost.py --before OLD_CHECKOUT --after . --rounds 2
    build/pallas-venv/bin/python bench/identity_cost.py --after . --rule layout

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
rule = sys.argv[2]
if rule == "layout":
    from kernelgym_pallas import layout_cuts
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
    facts = program_identity.compare(programs, sizes).facts if rule == "layout" else None  # untimed
    start = time.perf_counter()
    if rule == "layout":  # with the kernels' reads (decision_coverage's facts): prefix_reads too
        ok = not layout_cuts.problems(programs, ("small", "check", "full"), facts, sizes)
    else:
        ok = bool(program_identity.compare(programs, sizes).proven)
    out[f"{folder.parent.name}/{folder.name}"] = [time.perf_counter() - start, ok]
print(json.dumps(out))
"""


def _run(root: pathlib.Path, python: str, rule: str) -> dict:
    done = subprocess.run([python, "-c", _ONE_CHECKOUT, str(root), rule], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=pathlib.Path, help="a checkout (its source tree) to compare with")
    parser.add_argument("--after", type=pathlib.Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rule", choices=("identity", "layout"), default="identity",
                        help="program_identity.compare (default) or layout_cuts.problems")
    parser.add_argument("--python", default=sys.executable, help="a Python with jax (build/pallas-venv)")
    args = parser.parse_args()
    checkouts = ([("before", args.before)] if args.before else []) + [("after", args.after)]
    best = {label: {} for label, _ in checkouts}
    for r in range(args.rounds):
        for label, root in (checkouts if r % 2 == 0 else checkouts[::-1]):
            for task, (seconds, ok) in _run(root.resolve(), args.python, args.rule).items():
                old = best[label].get(task, (float("inf"), ok))
                best[label][task] = (min(old[0], seconds), ok)
    labels = [label for label, _ in checkouts]
    tasks = sorted(set.intersection(*(set(best[label]) for label in labels)))
    what = "proven" if args.rule == "identity" else "no cut named"
    header = f"{what} ({'/'.join(labels)})"
    print(f"{'task':50s} " + " ".join(f"{label + ' s':>9s}" for label in labels) + f" {header:>30s}")
    for task in tasks:
        print(f"{task:50s} " + " ".join(f"{best[label][task][0]:9.3f}" for label in labels) +
              f" {'/'.join(str(best[label][task][1]) for label in labels):>30s}")
    for label in labels:
        seconds = [best[label][t][0] for t in tasks]
        print(f"{label}: {len(tasks)} starters, total {sum(seconds):.2f} s, median {statistics.median(seconds):.3f} s, "
              f"largest {max(seconds):.3f} s; {what}: {sum(best[label][t][1] for t in tasks)}")


if __name__ == "__main__":
    main()
