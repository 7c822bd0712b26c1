"""Pairing compiled Mosaic kernels with traced pallas_calls (tpu_estimate._match) when XLA may
reorder calls (kernel_order.py): calls that depend on each other keep their order; independent
calls whose bytes would pair either way are not assigned at all."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from kernelgym_pallas import kernel_order, tpu_estimate  # noqa: E402


def _double(x_ref, y_ref):
    y_ref[...] = x_ref[...] * 2.0


def _call(x, rows):
    spec = pl.BlockSpec((rows, 128), lambda i: (i, 0))
    return pl.pallas_call(_double, grid=(x.shape[0] // rows,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def side_by_side(x):
    return _call(x, 8), _call(x, 64)


def one_after_another(x):
    return _call(_call(x, 8), 64)


def _facts(fn):
    program = jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((512, 128), jnp.float32))
    facts, _ = tpu_estimate.analyse_program(program)
    return program, facts


class KernelOrderTest(unittest.TestCase):
    def test_independent_calls_are_found(self):
        program, _ = _facts(side_by_side)
        self.assertEqual(kernel_order.independent_pairs(program), {frozenset({0, 1})})
        program, _ = _facts(one_after_another)
        self.assertEqual(kernel_order.independent_pairs(program), set())

    def test_independent_calls_of_like_bytes_are_not_paired(self):
        program, facts = _facts(side_by_side)
        compiled = [tpu_estimate.HloKernel(f"k{i}", "main", True, f.operand_bytes) for i, f in enumerate(facts)]
        self.assertEqual(tpu_estimate._match(compiled, facts, kernel_order.independent_pairs(program)), [None, None])

    def test_dependent_calls_keep_their_order(self):
        program, facts = _facts(one_after_another)
        compiled = [tpu_estimate.HloKernel(f"k{i}", "main", True, f.operand_bytes) for i, f in enumerate(facts)]
        self.assertEqual(tpu_estimate._match(compiled, facts, kernel_order.independent_pairs(program)), facts)


if __name__ == "__main__":
    unittest.main()
