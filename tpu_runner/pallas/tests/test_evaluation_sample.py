"""The judge's use of the full-size sample (evaluation._full_size_sample): a program wrong only at
the full size is `incorrect` there, the starter agrees with itself (also with a copy kernel after
it: a chain of kernels), a program the sample cannot run where the starter's can be loses its
estimate's trust with the reason named, the starter itself is not compared with itself, and a task
whose starter cannot be sampled leaves the estimate to the proof. Real tasks (jaxbench-p/gemm), real
kernels traced at its full sizes (8192 x 8192 x 28672: never run whole, only the sampled steps)."""

import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from kernelgym_pallas import artifact, evaluation, protocol, task_spec  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
GEMM = ROOT / "datasets/suites/jaxbench-p/gemm"


def _estimate() -> protocol.CandidateEstimate:
    return protocol.CandidateEstimate(estimated_us=10.0, mosaic_cycles=0.0, xla_us=0.0, trusted=True, reasons=[],
                                      method="", kernels=[])


def _sample(task, program, seed: int, estimate=None) -> list[str]:
    return evaluation._full_size_sample(task, program, seed, estimate or _estimate())


def _full_program(task, path: pathlib.Path, name: str):
    args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
    return jax.make_jaxpr(task_spec.load_function(path, "kernel", name))(*args)


class FullSizeSampleInTheJudge(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.task = task_spec.load_task(GEMM, "kernelgym", "jaxbench-p")

    def test_the_starter_is_not_compared_with_itself(self):
        details = _sample(self.task, _full_program(self.task, self.task.starter_path, "s1"), 11)
        self.assertEqual(len(details), 1)
        self.assertIn("not needed (the program is the starter's own", details[0])

    def test_the_starter_as_the_judge_reads_it_is_not_compared_with_itself(self):
        # The judge reads the tracer's program through the artifact, which stands in for the
        # functions a custom_jvp holds (conv3d_mish_tanh's mish, a softplus): the starter traced
        # in the judge must be read the same way to be recognised, else it is sampled against itself.
        task = task_spec.load_task(ROOT / "datasets/suites/jaxbench-k/conv3d_mish_tanh", "kernelgym", "jaxbench-k")
        program = _full_program(task, task.starter_path, "s2")
        program = artifact.load(artifact.dump({"full": program}, "candidate.py"))["full"]
        details = _sample(task, program, 11)
        self.assertIn("not needed (the program is the starter's own", details[0])

    def test_an_honest_kernel_other_than_the_starter_agrees(self):
        # The task's own knob setting with other tiles than the starter's: run on its sampled steps.
        template = (GEMM / "pallas/template.py").read_text()
        estimate = _estimate()
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "candidate.py"
            path.write_text('TILE = "m8n8"\nK_BLOCK = "k4"\n' + template)
            details = _sample(self.task, _full_program(self.task, path, "k1"), 11, estimate)
        self.assertRegex(details[0], r"^full-size sample: \d+ output blocks agree with the starter's")
        self.assertTrue(estimate.trusted)

    def test_k_chunks_that_run_short_only_at_the_full_size_are_incorrect(self):
        # Each output block reads 3 K chunks (all of K where checked, 3 of 32 at the full size).
        kernel = ROOT / "tests/adversarial_pallas/chunks_read_by_swapping_them_out/kernel.py"
        with self.assertRaises(evaluation.Outcome) as caught:
            _sample(self.task, _full_program(self.task, kernel, "c1"), 11)
        result = caught.exception.result
        self.assertEqual((result.status, result.stage), ("incorrect", "correctness"))
        self.assertIn("a sample of its output blocks", result.message)
        self.assertIn("outside tolerance of the starter's", result.message)

    def _with_a_copy_kernel_after(self, kernel_path: pathlib.Path, name: str):
        def program(a, b):  # the kernel, then a second pallas_call copying its output tile by tile
            from jax.experimental import pallas as pl
            c = task_spec.load_function(kernel_path, "kernel", name)(a, b)
            spec = pl.BlockSpec((256, 256), lambda i, j: (i, j))
            return pl.pallas_call(lambda x, y: y.__setitem__(..., x[...]), out_shape=c,
                                  grid=(c.shape[0] // 256, c.shape[1] // 256), in_specs=[spec], out_specs=spec)(c)
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in self.task.size_sets["full"].inputs]
        return jax.make_jaxpr(program)(*args)

    def test_a_chain_of_kernels_is_sampled_through_the_steps_each_needs(self):
        details = _sample(self.task, self._with_a_copy_kernel_after(self.task.starter_path, "s2"), 11)
        self.assertRegex(details[0], r"^full-size sample: \d+ output blocks agree with the starter's")
        kernel = ROOT / "tests/adversarial_pallas/chunks_read_by_swapping_them_out/kernel.py"
        with self.assertRaises(evaluation.Outcome) as caught:  # a copy kernel after it hides nothing
            _sample(self.task, self._with_a_copy_kernel_after(kernel, "c2"), 11)
        self.assertEqual(caught.exception.result.status, "incorrect")

    def test_a_program_it_cannot_run_where_the_starters_can_is_not_trusted(self):
        def two_summed(a, b):  # two kernels' outputs added outside them: not a chain
            starter = task_spec.load_function(self.task.starter_path, "kernel", "s3")
            return starter(a, b) + starter(a, b)
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in self.task.size_sets["full"].inputs]
        estimate = _estimate()
        details = _sample(self.task, jax.make_jaxpr(two_summed)(*args), 11, estimate)
        self.assertEqual(len(details), 1)
        self.assertIn("full-size sample: not run on this program (a program output is computed outside the pallas_calls",
                      details[0])
        self.assertFalse(estimate.trusted)
        self.assertTrue(any("could not be run on a sample of its grid, while the task's starter can be" in why
                            for why in estimate.reasons), estimate.reasons)

    def test_a_task_whose_starter_cannot_be_sampled_leaves_the_estimate_to_the_proof(self):
        # cross_entropy's starter writes its loss from every grid step (a reduction over all tokens).
        task = task_spec.load_task(ROOT / "datasets/suites/jaxbench-p/cross_entropy", "kernelgym", "jaxbench-p")
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
        starter = task_spec.load_function(task.starter_path, "kernel", "s4")
        estimate = _estimate()
        details = _sample(task, jax.make_jaxpr(lambda *xs: starter(*xs) * 1)(*args), 11, estimate)
        self.assertIn("full-size sample: not run for this task (", details[0])
        self.assertTrue(estimate.trusted)


class TheJudgesReadingOfTheCheckedRuns(unittest.TestCase):
    """Whether the judge goes on to the sample rests on its own reading of the runner's comparison
    (evaluation._within_tolerance): it must pass what the runner passes (correctness.cc: both NaN,
    or the same infinity), or an output with them would skip the sample unnoted (red team 27)."""

    def test_non_finite_values_match_as_the_runner_matches_them(self):
        class Spec:
            atol, rtol = 1e-3, 1e-3
        expected = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
        self.assertTrue(evaluation._within_tolerance([Spec()], [expected], [expected.copy()]))
        for wrong in ([1.0, 0.0, np.inf, -np.inf], [1.0, np.nan, -np.inf, -np.inf], [1.1, np.nan, np.inf, -np.inf]):
            self.assertFalse(evaluation._within_tolerance([Spec()], [expected], [np.array(wrong, np.float32)]), wrong)


if __name__ == "__main__":
    unittest.main()
