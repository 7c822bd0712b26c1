"""evaluation.exact_reference: a task's reference as its task defines it. Float32 contractions at
HIGHEST precision (exact float32), bfloat16 ones at DEFAULT (exact already at one pass, and what
XLA runs): libtpu's ragged-dot kernel refuses HIGHEST on bfloat16 operands, which left
jaxbench-p/megablox_gmm and ragged_dot without a reference estimate (test_tpu_estimate's
DevicelessCompiles compiles them)."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from kernelgym_pallas import evaluation  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[3]


def _precisions(closed):
    """(primitive, operand dtype, precision) of every contraction, at any depth."""
    out = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("dot_general", "ragged_dot_general"):
                out.append((eqn.primitive.name, str(eqn.invars[0].aval.dtype), eqn.params["precision"]))
            for value in eqn.params.values():
                for sub in (value if isinstance(value, (tuple, list)) else (value,)):
                    if hasattr(sub, "eqns"):
                        walk(sub)
                    elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                        walk(sub.jaxpr)
    walk(closed.jaxpr)
    return out


def mixed(a32, b32, lhs16, rhs16, sizes):
    dot = jnp.dot(a32, b32)
    inner = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))(lhs16, lhs16.T)
    ragged = jax.lax.ragged_dot(lhs16, rhs16, sizes, precision=jax.lax.Precision.HIGHEST,
                                preferred_element_type=jnp.float32)
    return dot, inner, ragged


class ExactReference(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(0)
        self.args = (rng.standard_normal((16, 32), np.float32), rng.standard_normal((32, 8), np.float32),
                     rng.standard_normal((24, 32)).astype(jnp.bfloat16),
                     rng.standard_normal((3, 32, 16)).astype(jnp.bfloat16), np.array([10, 0, 14], np.int32))

    def test_float32_at_highest_bfloat16_at_default(self):
        found = _precisions(jax.make_jaxpr(evaluation.exact_reference(mixed))(*self.args))
        highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
        self.assertEqual(found, [("dot_general", "float32", highest), ("dot_general", "bfloat16", None),
                                 ("ragged_dot_general", "bfloat16", None)])

    def test_same_answers_as_at_highest(self):
        # bfloat16 products are exact in float32: HIGHEST changes nothing in them, and the float32
        # dot is exact in both; the outputs (a tuple, as the reference returns it) are bit-equal.
        with jax.default_matmul_precision("highest"):
            want = jax.jit(mixed)(*self.args)
        got = jax.jit(evaluation.exact_reference(mixed))(*self.args)
        self.assertIsInstance(got, tuple)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(np.asarray(w), np.asarray(g))

    def test_ragged_task_references_keep_their_answers(self):
        from kernelgym_pallas import task_spec
        for name in ("megablox_gmm", "ragged_dot"):
            task = task_spec.load_task(REPO / "datasets" / "suites" / "jaxbench-p" / name, "kernelgym")
            inputs = task.draw_inputs("check", 3)
            with jax.default_matmul_precision("highest"):
                want = np.asarray(jax.jit(task.reference())(*inputs))
            got = np.asarray(jax.jit(evaluation.exact_reference(task.reference()))(*inputs))
            self.assertEqual(got.dtype, jnp.bfloat16)
            np.testing.assert_array_equal(want, got)


if __name__ == "__main__":
    unittest.main()
