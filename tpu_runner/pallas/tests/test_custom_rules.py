"""Custom differentiation rules taken out of a traced program (kernelgym_pallas/custom_rules.py)."""

import dataclasses
import functools
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from kernelgym_pallas import artifact, custom_rules  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _Scale:  # a non-differentiable argument no reader rebuilds, as jax's flash_attention's BlockSizes
    factor: float


def _scaled(x_ref, o_ref, *, factor):
    o_ref[...] = x_ref[...] * factor


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _kernel(x, scale):
    return pl.pallas_call(functools.partial(_scaled, factor=scale.factor),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


_kernel.defvjp(lambda x, scale: (_kernel(x, scale), None), lambda scale, _, g: (g * scale.factor,))


def _names(jaxpr) -> list[str]:
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn.primitive.name)
        if "jaxpr" in eqn.params and hasattr(eqn.params["jaxpr"], "jaxpr"):
            out += _names(eqn.params["jaxpr"].jaxpr)
    return out


class WithoutCustomRules(unittest.TestCase):
    def setUp(self):
        self.x = jax.ShapeDtypeStruct((8, 128), jnp.float32)

    def test_a_custom_vjp_inside_a_jit_becomes_its_forward_program(self):
        traced = jax.make_jaxpr(jax.jit(lambda x: _kernel(x, _Scale(3.0)) + 1))(self.x)
        self.assertIn("custom_vjp_call", _names(traced.jaxpr))
        with self.assertRaises(artifact.ArtifactError):  # what refused the honest kernel
            artifact.load(artifact.dump({"small": traced}, __file__))
        plain = custom_rules.without_custom_rules(traced)
        self.assertNotIn("custom_vjp_call", _names(plain.jaxpr))
        self.assertIn("pallas_call", _names(plain.jaxpr))
        loaded = artifact.load(artifact.dump({"small": plain}, __file__))["small"]
        x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
        from jax._src import core
        got = core.jaxpr_as_fun(loaded)(x)[0]
        np.testing.assert_array_equal(np.asarray(got), x * 3.0 + 1)

    def test_a_program_without_one_is_handed_over_unchanged(self):
        traced = jax.make_jaxpr(lambda x: x * 2)(self.x)
        self.assertIs(custom_rules.without_custom_rules(traced), traced)


if __name__ == "__main__":
    unittest.main()
