"""The canonical key of a traced program (kernelgym_pallas/program_key.py), which keys the runner's
cache of candidate compiles: the same program traced twice, in this process or another one with
another hash seed, gets the same key; a program that differs in one literal, one parameter (a
dot's precision, an index map, the compiler's parameters, interpret, a declared cost), one dtype or
one constant's bytes gets another. Every program goes through the tracer's writer and the judge's
reader first (artifact.py), as in an evaluation."""

import os
import pathlib
import subprocess
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import artifact, program_key  # noqa: E402

HERE = pathlib.Path(__file__).resolve()


def _kernel(a_ref, b_ref, o_ref, *, scale, precision, cast):
    product = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision)
    o_ref[...] = (product * scale).astype(cast).astype(o_ref.dtype)


def program(scale=2.0, precision=None, cast=jnp.float32, dtype=jnp.float32, a_map=lambda i, j: (i, 0),
            semantics=("parallel", "parallel"), interpret=False, cost=None, block=128, constant=None):
    """A blocked matmul through pallas_call, one choice at a time changeable; traced, written by
    the tracer's writer and read by the judge's reader."""
    def kernel(a, b):
        out = pl.pallas_call(
            lambda a_ref, b_ref, o_ref: _kernel(a_ref, b_ref, o_ref, scale=scale, precision=precision, cast=cast),
            grid=(256 // block, 256 // block),
            in_specs=[pl.BlockSpec((block, 128), a_map), pl.BlockSpec((128, block), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
            interpret=interpret, cost_estimate=cost)(a, b)
        return out if constant is None else out + jnp.asarray(constant)
    args = [jax.ShapeDtypeStruct((256, 128), dtype), jax.ShapeDtypeStruct((128, 256), dtype)]
    traced = jax.make_jaxpr(kernel)(*args)
    return artifact.load(artifact.dump({"full": traced}, __file__))["full"]


def key(closed, **context):
    return program_key.digest(closed, {"estimate": True, **context})


class SameProgramSameKey(unittest.TestCase):
    def test_traced_twice_in_one_process(self):
        self.assertEqual(key(program()), key(program()))

    def test_traced_in_two_processes_with_other_hash_seeds(self):
        # The tracer's pickle of this program differs between such processes (its effect sets are
        # written in hash order); the key must not.
        keys = set()
        for seed in ("0", "1", "4242"):
            done = subprocess.run([sys.executable, str(HERE), "--print-key"], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONHASHSEED=seed, JAX_PLATFORMS="cpu"), timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            keys.add(done.stdout.strip().splitlines()[-1])
        keys.add(key(program()))
        self.assertEqual(len(keys), 1, keys)


    def test_a_cached_property_asked_for_changes_nothing(self):
        # jax's AbstractMesh (in every aval's sharding) caches a derived flag in its __dict__ the
        # first time something asks for it; exact_reference's nested trace does, so a judge that
        # had run a reference wrote the same program with one attribute more.
        closed = program()
        before = key(closed)
        mesh = closed.jaxpr.outvars[0].aval.sharding.mesh
        mesh.__dict__.pop("_are_all_axes_explicit_or_manual", None)
        self.assertEqual(key(closed), before)
        self.assertIn(mesh._are_all_axes_explicit_or_manual, (True, False))
        self.assertIn("_are_all_axes_explicit_or_manual", mesh.__dict__)
        self.assertEqual(key(closed), before)


class OneChangeAnotherKey(unittest.TestCase):
    def differs(self, **change):
        self.assertNotEqual(key(program()), key(program(**change)), change)

    def test_a_literal(self):
        self.differs(scale=2.5)
        self.differs(scale=2.0 + 2.0 ** -22)  # one float32 ulp

    def test_the_sign_of_a_zero_literal(self):
        self.assertNotEqual(key(program(scale=0.0)), key(program(scale=-0.0)))

    def test_a_dots_precision(self):
        self.differs(precision=jax.lax.Precision.HIGHEST)
        self.assertNotEqual(key(program(precision=jax.lax.Precision.HIGH)),
                            key(program(precision=jax.lax.Precision.HIGHEST)))

    def test_an_index_map(self):
        # The printed jaxpr shows a block's shape but not its index map: the key must read it.
        self.differs(a_map=lambda i, j: (j, 0))
        self.assertNotIn("lambda i, j", str(program()))  # (the printed form hides the map)

    def test_a_block_shape(self):
        self.differs(block=64)

    def test_a_dtype(self):
        self.differs(dtype=jnp.bfloat16)
        self.differs(cast=jnp.bfloat16)

    def test_the_compilers_parameters(self):
        self.differs(semantics=("parallel", "arbitrary"))

    def test_interpret_and_a_declared_cost(self):
        self.differs(interpret=True)
        self.differs(cost=pl.CostEstimate(flops=10, transcendentals=0, bytes_accessed=10))
        self.assertNotEqual(key(program(cost=pl.CostEstimate(flops=10, transcendentals=0, bytes_accessed=10))),
                            key(program(cost=pl.CostEstimate(flops=11, transcendentals=0, bytes_accessed=10))))

    def test_one_byte_of_a_constant(self):
        base = np.zeros((256, 256), np.float32)
        other = base.copy()
        other[17, 3] = np.float32(1e-30)
        self.assertEqual(key(program(constant=base)), key(program(constant=base.copy())))
        self.assertNotEqual(key(program(constant=base)), key(program(constant=other)))

    def test_the_kernels_function_name(self):
        # Mosaic names the kernel after it; a comment or a moved line (source locations) is not
        # part of the program.
        def renamed_body(a_ref, b_ref, o_ref):
            _kernel(a_ref, b_ref, o_ref, scale=2.0, precision=None, cast=jnp.float32)

        def plain_body(a_ref, b_ref, o_ref):
            _kernel(a_ref, b_ref, o_ref, scale=2.0, precision=None, cast=jnp.float32)

        def traced(body):
            def kernel(a, b):
                return pl.pallas_call(body, grid=(2,), in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0)),
                                                                 pl.BlockSpec((128, 256), lambda i: (0, 0))],
                                      out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
                                      out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32))(a, b)
            args = [jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((128, 256), jnp.float32)]
            return artifact.load(artifact.dump({"full": jax.make_jaxpr(kernel)(*args)}, __file__))["full"]
        self.assertEqual(key(traced(plain_body)), key(traced(plain_body)))
        self.assertNotEqual(key(traced(plain_body)), key(traced(renamed_body)))

    def test_the_judges_context(self):
        closed = program()
        self.assertNotEqual(key(closed), key(closed, estimate=False))


class WhatCannotBeWrittenIsNotCached(unittest.TestCase):
    def test_an_object_of_another_module(self):
        class Foreign:
            pass
        closed = program()
        eqn = closed.jaxpr.eqns[0]
        params = dict(eqn.params, foreign=Foreign())
        closed.jaxpr.eqns[0] = eqn.replace(params=params)
        with self.assertRaises(program_key.Uncacheable):
            key(closed)

    def test_a_function(self):
        closed = program()
        eqn = closed.jaxpr.eqns[0]
        closed.jaxpr.eqns[0] = eqn.replace(params=dict(eqn.params, rule=jax.numpy.sin))
        with self.assertRaises(program_key.Uncacheable):
            key(closed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--print-key"]:
        print(key(program()))
    else:
        unittest.main()
