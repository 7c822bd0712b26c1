"""Every knob setting of every Pallas task through `kernelgym eval` (the judge, its estimate and
whether it is trusted): a false refusal of a task's own knob is an honest kernel the environment
does not pay.

    python3 bench/knob_trust.py [--build build] [TASK ...]

One line per setting: task, knobs, verdict, trusted, estimated speedup, seconds, and the reasons
(or the message) where it is not a trusted ok; a summary at the end.
"""
import argparse
import collections
import itertools
import json
import pathlib
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    parser.add_argument("tasks", nargs="*", help="task ids (default: every task with knobs)")
    args = parser.parse_args()
    summary = collections.Counter()
    for path in sorted(REPO.glob("datasets/suites/*/*/pallas/pallas.json")):
        knobs = json.loads(path.read_text()).get("knobs")
        task = "/".join(path.parts[-4:-2])
        if not knobs or (args.tasks and task not in args.tasks):
            continue
        names = sorted(knobs)
        for values in itertools.product(*[knobs[n]["values"] for n in names]):
            setting = ",".join(f"{n}={v}" for n, v in zip(names, values))
            start = time.time()
            done = subprocess.run([str(args.build / "cli" / "kernelgym"), "eval", "--backend", "pallas", "--task", task,
                                   "--knobs", setting, "--json"], capture_output=True, text=True)
            try:
                result = json.loads(done.stdout)
            except json.JSONDecodeError:
                summary["no result"] += 1
                print(task, setting, "no result:", done.stderr[-200:], flush=True)
                continue
            estimate = result.get("estimate") or {}
            trusted = estimate.get("candidate_trusted")
            if result["status"] != "ok":
                kind, why = result["status"], result.get("message", "")[:200]
            elif trusted:
                kind, why = "ok, trusted", ""
            else:
                kind, why = "ok, untrusted", "; ".join(estimate.get("reasons") or [])[:300]
            summary[kind] += 1
            seconds = time.time() - start
            print(f"{task} {setting} {kind} speedup={estimate.get('speedup')} {seconds:.1f}s {why}", flush=True)
    print("summary:", dict(summary))


if __name__ == "__main__":
    main()
