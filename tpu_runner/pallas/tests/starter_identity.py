"""Every bundled task's Pallas starter is proven (program_identity.py): its full-size program is
the checked one, so its estimate can be paid. A starter that is not must be listed with why; the
list must stay true (a listed starter that becomes proven fails too, so the list shrinks).

Not in the suite's discovery (its name does not start with test_): ctest's PallasStarters judges
every starter through the real judge and asserts its estimate trusted, which needs this proof and
the judge's other rules too. This is the fast loop for a change to the proof (~25 s, no judge):
`build/pallas-venv/bin/python -m unittest tests.starter_identity` from tpu_runner/pallas."""

import pathlib
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from kernelgym_pallas import artifact, program_identity, task_spec  # noqa: E402

# Starters whose full-size program is not proven, each with a phrase of the reason (docs/pallas.md,
# "Every bundled starter's text is proven", says what the others needed). The list only shrinks.
NOT_PROVEN: dict[str, str] = {
    # The text is the template at every size set; decision coverage stops it: a paged kernel
    # compares key positions (page * PS + lane) with each row's data-given last position and
    # divides a data-given length by PS. (models/rotary_embedding's float-float angles, split
    # with bitcasts, are proven since the judge evaluates bitcasts.)
    "jaxbench-p/ragged_paged_attention": "a decision between data",
}


def _tasks():
    for task_json in sorted(ROOT.glob("datasets/suites/*/*/pallas/starter.py")):
        folder = task_json.parent.parent
        yield f"{folder.parent.name}/{folder.name}", folder


def identity_of(folder: pathlib.Path):
    task = task_spec.load_task(folder, "kernelgym", folder.parent.name)
    kernel = task_spec.load_function(folder / "pallas" / "starter.py", "kernel", f"starter_{folder.name}")
    programs = {}
    for name in ("small", "check", "full"):
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets[name].inputs]
        programs[name] = jax.make_jaxpr(kernel)(*args)
    programs = artifact.load(artifact.dump(programs, "starter.py"))  # what the judge reads
    return program_identity.compare(programs, {n: task.size_sets[n].sizes for n in ("small", "check", "full")})


class StarterIdentityTest(unittest.TestCase):
    def test_every_starter_is_proven_but_the_listed_ones(self):
        seen = 0
        for task_id, folder in _tasks():
            seen += 1
            with self.subTest(task_id):
                identity = identity_of(folder)
                reasons = list(program_identity.iter_reasons(identity))
                self.assertFalse(identity.structural, identity.structural)
                if task_id in NOT_PROVEN:
                    self.assertFalse(identity.proven, f"{task_id} is proven now: take it off the list")
                    self.assertTrue(any(NOT_PROVEN[task_id] in r for r in reasons), reasons[:2])
                else:
                    self.assertTrue(identity.proven, reasons[:3])
        self.assertGreaterEqual(seen, 62)


if __name__ == "__main__":
    unittest.main()
