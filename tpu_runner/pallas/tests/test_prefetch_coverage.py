"""Blocks named through scalar-prefetched tables (kernelgym_pallas/prefetch_coverage.py): real
Pallas programs traced at three size sets, their tables computed from drawn inputs, the blocks
each index map names counted."""

import functools
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import prefetch_coverage  # noqa: E402

K_BY_SET = {"small": 256, "check": 768, "full": 2048}  # 1, 3 and 8 blocks of 256


def _body(t_ref, a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...]


def _matmul(table_of, steps_of, a, b):
    """A (128, K) x (K, 128) product whose K blocks are named through the table `table_of(K, a)`,
    over `steps_of(K)` grid steps."""
    k = a.shape[1]
    steps = steps_of(k)
    return pl.pallas_call(
        _body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1, steps),
            in_specs=[pl.BlockSpec((128, 256), lambda i, s, t: (0, t[s])),
                      pl.BlockSpec((256, 128), lambda i, s, t: (t[s], 0))],
            out_specs=pl.BlockSpec((128, 128), lambda i, s, t: (0, 0)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
    )(table_of(k, a), a, b)


def _problems(kernel):
    programs, inputs = {}, {}
    rng = np.random.default_rng(0)
    for name, k in K_BY_SET.items():
        inputs[name] = [rng.standard_normal((128, k), np.float32), rng.standard_normal((k, 128), np.float32)]
        programs[name] = jax.make_jaxpr(kernel)(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs[name]])
    return prefetch_coverage.problems(programs, lambda name, wanted: [inputs[name][w] for w in wanted],
                                      ("small", "check"), "full")


def _copying_body(t_ref, a_hbm, b_hbm, o_ref, a_buf, b_buf, acc_ref, sem):
    s = pl.program_id(1)

    @pl.when(s == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    start = t_ref[s] * 256
    copy_a = pltpu.make_async_copy(a_hbm.at[:, pl.ds(start, 256)], a_buf, sem.at[0])
    copy_b = pltpu.make_async_copy(b_hbm.at[pl.ds(start, 256), :], b_buf, sem.at[1])
    copy_a.start()
    copy_b.start()
    copy_a.wait()
    copy_b.wait()
    acc_ref[...] += jnp.dot(a_buf[...], b_buf[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...]


def _copying_matmul(table_of, steps_of, a, b):
    """_matmul with the operands left in HBM and copied by the kernel itself, K slice t[s] at step s."""
    k = a.shape[1]
    return pl.pallas_call(
        _copying_body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1, steps_of(k)),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((128, 128), lambda i, s, t: (0, 0)),
            scratch_shapes=[pltpu.VMEM((128, 256), jnp.float32), pltpu.VMEM((256, 128), jnp.float32),
                            pltpu.VMEM((128, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]),
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
    )(table_of(k, a), a, b)


class PrefetchCoverageTest(unittest.TestCase):
    def test_a_table_that_walks_every_block_is_proven(self):
        walk = functools.partial(_matmul, lambda k, a: jnp.arange(k // 256, dtype=jnp.int32), lambda k: k // 256)
        self.assertEqual(_problems(walk), [])

    def test_a_fixed_walk_short_of_the_full_size_is_named(self):
        # Three steps: every block at 256 (repeats) and 768, 3 of 8 at 2048.
        short = functools.partial(_matmul, lambda k, a: jnp.arange(3, dtype=jnp.int32) % (k // 256), lambda k: 3)
        found = _problems(short)
        self.assertTrue(any("names 3 of its 8" in p for p in found), found)

    def test_a_table_that_follows_the_data_is_computed_from_it(self):
        # The same walk plus a term of the data that is zero for every finite number.
        def table(k, a):
            return jnp.arange(3, dtype=jnp.int32) % (k // 256) + (a[0, :1] != a[0, :1]).astype(jnp.int32)
        found = _problems(functools.partial(_matmul, table, lambda k: 3))
        self.assertTrue(any("names 3 of its 8" in p for p in found), found)

    def test_copies_at_table_starts_that_walk_every_slice_are_proven(self):
        walk = functools.partial(_copying_matmul, lambda k, a: jnp.arange(k // 256, dtype=jnp.int32),
                                 lambda k: k // 256)
        self.assertEqual(_problems(walk), [])

    def test_copies_at_table_starts_short_of_the_full_size_are_named(self):
        # The copies read K slice t[s] = s mod (K/256) for 3 steps: all of K at 256 and 768, 768 of
        # 2048 at the full size; without the tables' values their starts were data, not counted.
        short = functools.partial(_copying_matmul, lambda k, a: jnp.arange(3, dtype=jnp.int32) % (k // 256),
                                  lambda k: 3)
        found = _problems(short)
        self.assertTrue(any("operand 0: each output block's grid steps read every element of its dimension 1" in p
                            and "read 768 of 2048" in p for p in found), found)
        self.assertTrue(any("operand 1: each output block's grid steps read every element of its dimension 0" in p
                            for p in found), found)

    def test_a_table_from_a_kernels_output_is_not_known(self):
        def chained(a, b):
            first = pl.pallas_call(lambda x_ref, y_ref: y_ref.__setitem__(..., x_ref[...]),
                                   out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(a[:8, :128])
            return _matmul(lambda k, _: first[0, :k // 256].astype(jnp.int32) % (k // 256), lambda k: k // 256, a, b)
        found = _problems(chained)
        self.assertEqual(len(found), 1)
        self.assertIn("is computed from a kernel's output", found[0])

    def test_a_table_past_the_work_bound_is_not_computed(self):
        def heavy(k, a):  # an (8192, K) x (K, 8192) product: 64M outputs, past the bound at every size
            big = jnp.tile(a, (64, 1)) @ jnp.tile(a, (64, 1)).T
            return (jnp.arange(k // 256, dtype=jnp.int32) + (big[0, :1] != big[0, :1])).astype(jnp.int32)
        found = _problems(functools.partial(_matmul, heavy, lambda k: k // 256))
        self.assertEqual(len(found), 1)
        self.assertIn("units of work to compute", found[0])


if __name__ == "__main__":
    unittest.main()
