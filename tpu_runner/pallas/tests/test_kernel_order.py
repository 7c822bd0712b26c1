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


def chain_beside(x, y):
    # Call 0 on x; calls 1 -> 2 -> 3 on y, the last on 512 rows again: calls 0 and 3 have the same
    # bytes (and differ in their grids), but 3 comes after 1 and 2 in any order XLA may choose.
    first = _call(x, 8)
    second = _call(y, 64)
    third = _call(jnp.concatenate([second, second]), 64)
    return first, _call(third[:512], 64)


def _facts(fn, *shapes):
    shapes = shapes or ((512, 128),)
    program = jax.make_jaxpr(fn)(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
    facts, _ = tpu_estimate.analyse_program(program)
    return program, facts


def _compiled(facts, order):
    return [tpu_estimate.HloKernel(f"k{i}", "main", True, facts[i].operand_bytes) for i in order]


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

    def test_independent_calls_reordered_by_xla_are_paired_by_their_bytes(self):
        # XLA compiled calls 1 and 0 the other way round (mla_attention's starter: its k_pe
        # down-projection first): the bytes tell them apart, so each kernel gets its own call.
        program, facts = _facts(chain_beside, (512, 128), (1024, 128))
        independent = kernel_order.independent_pairs(program)
        self.assertEqual(independent, {frozenset({0, j}) for j in (1, 2, 3)})
        self.assertEqual(tpu_estimate._match(_compiled(facts, [1, 0, 2, 3]), facts, independent),
                         [facts[1], facts[0], facts[2], facts[3]])
        # Call 3 has call 0's bytes but comes after 1 and 2: kernel 0 of [0, 1, 2, 3] is call 0.
        self.assertEqual(tpu_estimate._match(_compiled(facts, [0, 1, 2, 3]), facts, independent), facts)
        # Where 0 and 3 could both come last, the last kernel could be either: nothing is paired.
        self.assertEqual(tpu_estimate._match(_compiled(facts, [1, 2, 0, 3]), facts, independent), [None] * 4)
        # An order the data do not allow (2 before 1) pairs nothing.
        self.assertEqual(tpu_estimate._match(_compiled(facts, [2, 1, 0, 3]), facts, independent), [None] * 4)

    def test_calls_of_one_kind_pair_in_either_order(self):
        # Two calls of one kernel on arrays of one shape (mla_attention's k and v up-projections):
        # which is which changes no price.
        program, facts = _facts(lambda x: (_call(x, 64), _call(x * 2.0, 64)))
        independent = kernel_order.independent_pairs(program)
        self.assertEqual(tpu_estimate._match(_compiled(facts, [1, 0]), facts, independent), facts)


if __name__ == "__main__":
    unittest.main()
