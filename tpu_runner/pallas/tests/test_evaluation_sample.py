"""The judge's use of the full-size sample (evaluation._full_size_sample): a program wrong only at
the full size is `incorrect` there, the starter agrees with itself (also with a copy kernel after
it: a chain of kernels), and a program the sample cannot run is left to the proof with the reason
in the details. Real task (jaxbench-p/gemm), real
kernels traced at its full sizes (8192 x 8192 x 28672: never run whole, only the sampled steps)."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from kernelgym_pallas import evaluation, task_spec  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
GEMM = ROOT / "datasets/suites/jaxbench-p/gemm"


def _full_program(task, path: pathlib.Path, name: str):
    args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in task.size_sets["full"].inputs]
    return jax.make_jaxpr(task_spec.load_function(path, "kernel", name))(*args)


class FullSizeSampleInTheJudge(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.task = task_spec.load_task(GEMM, "kernelgym", "jaxbench-p")

    def test_the_starter_agrees_with_itself(self):
        details = evaluation._full_size_sample(self.task, _full_program(self.task, self.task.starter_path, "s1"), 11)
        self.assertEqual(len(details), 1)
        self.assertRegex(details[0], r"^full-size sample: \d+ output blocks agree with the starter's")

    def test_k_chunks_that_run_short_only_at_the_full_size_are_incorrect(self):
        # Each output block reads 3 K chunks (all of K where checked, 3 of 32 at the full size).
        kernel = ROOT / "tests/adversarial_pallas/chunks_read_by_swapping_them_out/kernel.py"
        with self.assertRaises(evaluation.Outcome) as caught:
            evaluation._full_size_sample(self.task, _full_program(self.task, kernel, "c1"), 11)
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
        details = evaluation._full_size_sample(self.task, self._with_a_copy_kernel_after(self.task.starter_path, "s2"), 11)
        self.assertRegex(details[0], r"^full-size sample: \d+ output blocks agree with the starter's")
        kernel = ROOT / "tests/adversarial_pallas/chunks_read_by_swapping_them_out/kernel.py"
        with self.assertRaises(evaluation.Outcome) as caught:  # a copy kernel after it hides nothing
            evaluation._full_size_sample(self.task, self._with_a_copy_kernel_after(kernel, "c2"), 11)
        self.assertEqual(caught.exception.result.status, "incorrect")

    def test_a_program_it_cannot_run_is_left_to_the_proof_with_the_reason(self):
        def two_summed(a, b):  # two kernels' outputs added outside them: not a chain
            starter = task_spec.load_function(self.task.starter_path, "kernel", "s3")
            return starter(a, b) + starter(a, b)
        args = [jax.ShapeDtypeStruct(tuple(s.shape), jnp.dtype(s.dtype)) for s in self.task.size_sets["full"].inputs]
        details = evaluation._full_size_sample(self.task, jax.make_jaxpr(two_summed)(*args), 11)
        self.assertEqual(len(details), 1)
        self.assertIn("full-size sample: not run (a program output is computed outside the pallas_calls", details[0])


if __name__ == "__main__":
    unittest.main()
