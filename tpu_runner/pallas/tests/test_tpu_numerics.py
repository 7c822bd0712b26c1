"""The TPU's arithmetic in the CPU check (kernelgym_pallas/tpu_numerics.py): a float32 Pallas
matmul at precision DEFAULT, run in interpret mode after the rewrite, computes what one bfloat16
pass of the MXU computes; at HIGHEST it stays exact float32."""

import functools
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax._src import core  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import jaxpr_check, tpu_numerics  # noqa: E402


def _body(a_ref, b_ref, o_ref, *, precision):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision)


def matmul(a, b, precision=None):
    return pl.pallas_call(functools.partial(_body, precision=precision), grid=(1,),
                          in_specs=[pl.BlockSpec((128, 256), lambda i: (0, 0)),
                                    pl.BlockSpec((256, 128), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((128, 128), lambda i: (0, 0)),
                          out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))(a, b)


def run_checked(fn, a, b, rewrite=True):
    program = jax.make_jaxpr(fn)(a, b)
    if rewrite:
        program = tpu_numerics.as_on_tpu(program)
    interpret = pltpu.InterpretParams()
    return np.asarray(jax.jit(core.jaxpr_as_fun(jaxpr_check.set_interpret(program, interpret)))(a, b)[0])


class TpuNumericsTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.a = rng.standard_normal((128, 256), dtype=np.float32)
        self.b = rng.standard_normal((256, 128), dtype=np.float32)
        exact = self.a.astype(np.float64) @ self.b.astype(np.float64)
        bf16 = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float64)
        self.exact, self.one_pass = exact, bf16(self.a) @ bf16(self.b)

    def test_a_default_precision_dot_is_checked_as_one_bfloat16_pass(self):
        got = run_checked(matmul, self.a, self.b)
        np.testing.assert_allclose(got, self.one_pass, rtol=1e-5, atol=1e-4)
        # ... which is far from exact float32: a float32 task's tolerance would refuse it.
        self.assertGreater(np.max(np.abs(got - self.exact)), 1e-2)

    def test_without_the_rewrite_interpret_mode_is_exact(self):
        got = run_checked(matmul, self.a, self.b, rewrite=False)
        np.testing.assert_allclose(got, self.exact, rtol=1e-5, atol=1e-4)

    def test_a_highest_precision_dot_stays_exact_float32(self):
        got = run_checked(functools.partial(matmul, precision=jax.lax.Precision.HIGHEST), self.a, self.b)
        np.testing.assert_allclose(got, self.exact, rtol=1e-5, atol=1e-4)

    def test_bfloat16_operands_are_left_as_they_are(self):
        a, b = self.a.astype(jnp.bfloat16), self.b.astype(jnp.bfloat16)
        program = jax.make_jaxpr(matmul)(a, b)
        self.assertEqual(str(tpu_numerics.as_on_tpu(program)), str(program))

    def test_numerics_the_check_cannot_reproduce_are_named(self):
        f16 = jax.make_jaxpr(lambda a, b: jnp.dot(a, b))(self.a.astype(np.float16), self.b.astype(np.float16))
        self.assertIn("float16", tpu_numerics.unsupported(f16)[0])
        tf32 = jax.make_jaxpr(lambda a, b: jnp.dot(a, b, precision=jax.lax.DotAlgorithmPreset.TF32_TF32_F32))(
            self.a, self.b)
        self.assertIn("TF32", tpu_numerics.unsupported(tf32)[0])
        self.assertEqual(tpu_numerics.unsupported(jax.make_jaxpr(matmul)(self.a, self.b)), [])


if __name__ == "__main__":
    unittest.main()
