"""The proof that the full-size program is the checked one (kernelgym_pallas/program_identity.py):
real Pallas kernels traced at three size sets, honest ones proven, ones that change only at the
full size not."""

import functools
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import program_identity  # noqa: E402

# Each size changes between the checked sets by a ratio with a prime of its own (x2, x3/2, x5/4),
# as the tasks' size sets do; the full size is far from both.
# M spans four blocks at the small size: a count of blocks minus one (3, then 7) then has a ratio no
# product of the sizes' ratios forms, so it cannot be mistaken for one (with two blocks, 1 then 3,
# it would equal M*N/2^18 at both checked sets: a number the checked sets cannot place).
SIZES = {"small": {"M": 1024, "N": 512, "K": 1024},
         "check": {"M": 2048, "N": 768, "K": 1280},
         "full": {"M": 8192, "N": 28672, "K": 8192}}
# Every size doubled: a number that follows M cannot be told from one that follows N or K.
DOUBLED = {"small": {"M": 256, "N": 256, "K": 512},
           "check": {"M": 512, "N": 512, "K": 1024},
           "full": {"M": 8192, "N": 28672, "K": 8192}}


def _matmul_body(a_ref, b_ref, c_ref, acc_ref, *, precision=None, scale=1.0):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = (acc_ref[...] * scale).astype(c_ref.dtype)


def matmul(a, b, *, full_size_tweak=None):
    """A tiled matmul in 256-blocks; `full_size_tweak` changes one thing only at the full size
    (M >= 8192), as an attacker would."""
    m, k = a.shape
    n = b.shape[1]
    at_full = m >= 8192
    grid = (m // 256, n // 256, k // 256)
    precision, scale = None, 1.0
    if at_full and full_size_tweak == "half_grid":
        grid = (grid[0] // 2, grid[1], grid[2])
    if at_full and full_size_tweak == "no_k_loop":
        grid = (grid[0], grid[1], 1)
    if at_full and full_size_tweak == "empty_grid":
        grid = (0, grid[1], grid[2])
    if at_full and full_size_tweak == "precision":
        precision = jax.lax.Precision.HIGHEST
    if at_full and full_size_tweak == "scale":
        scale = 0.5
    return pl.pallas_call(
        functools.partial(_matmul_body, precision=precision, scale=scale),
        grid=grid,
        in_specs=[pl.BlockSpec((256, 256), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((256, 256), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((256, 256), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        scratch_shapes=[pltpu.VMEM((256, 256), jnp.float32)],
    )(a, b)


def _scaled_body(x_ref, o_ref, *, scale):
    o_ref[...] = x_ref[...] * scale


def scaled_by_inverse_sqrt(a, b):
    """An attention-like 1/sqrt(K) scale: a floating literal that follows K^-1/2."""
    m, k = a.shape
    return pl.pallas_call(functools.partial(_scaled_body, scale=1.0 / (k ** 0.5)), grid=(m // 256,),
                          in_specs=[pl.BlockSpec((256, k), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((256, k), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((m, k), a.dtype))(a)


def unrolled_by_size(a, b):
    """A Python loop whose count follows the sizes, unrolled into the kernel."""
    m, k = a.shape
    steps = k // 256

    def body(x_ref, o_ref):
        total = jnp.zeros((256, 256), jnp.float32)
        for s in range(steps):
            total += x_ref[:, s * 256:(s + 1) * 256]
        o_ref[...] = total

    return pl.pallas_call(body, grid=(m // 256,), in_specs=[pl.BlockSpec((256, k), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((256, 256), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((m, 256), a.dtype))(a)


def clamped_block_index(a, b):
    """Outside the kernel, a block index clamped to the last block (a count minus one), and a
    kernel that reads it as scalar-prefetch-free data: an integer that follows M/256 - 1."""
    m, k = a.shape
    last = jnp.minimum(jnp.arange(8, dtype=jnp.int32), m // 256 - 1)
    return scaled_by_inverse_sqrt(a, b), last


def with_numpy_table(a, b):
    """A constant table computed by numpy at trace time: its values change with the sizes."""
    import numpy as np
    m, k = a.shape
    table = jnp.asarray(np.cos(np.arange(k, dtype=np.float32) / k))
    return scaled_by_inverse_sqrt(a * table, b)


def trace(fn, sizes):
    out = {}
    for name, s in sizes.items():
        a = jax.ShapeDtypeStruct((s["M"], s["K"]), jnp.float32)
        b = jax.ShapeDtypeStruct((s["K"], s["N"]), jnp.float32)
        out[name] = jax.make_jaxpr(fn)(a, b)
    return out


class ProgramIdentityTest(unittest.TestCase):
    def compare(self, fn, sizes=SIZES):
        return program_identity.compare(trace(fn, sizes), sizes)

    def test_an_honest_tiled_matmul_is_proven(self):
        identity = self.compare(matmul)
        self.assertTrue(identity.proven, list(program_identity.iter_reasons(identity)))
        self.assertGreater(identity.varying, 5)  # shapes, grid extents, the last-k literal

    def test_a_floating_scale_that_follows_a_size_is_proven(self):
        identity = self.compare(scaled_by_inverse_sqrt)
        self.assertTrue(identity.proven, list(program_identity.iter_reasons(identity)))

    def test_a_grid_that_changes_only_at_the_full_size_is_not_proven(self):
        for tweak, where in (("half_grid", "grid[0]"), ("no_k_loop", "grid[2]"), ("empty_grid", "grid[0]")):
            with self.subTest(tweak):
                identity = self.compare(functools.partial(matmul, full_size_tweak=tweak))
                self.assertFalse(identity.proven)
                self.assertFalse(identity.structural)
                self.assertTrue(any(where in reason for reason in identity.unproven), identity.unproven)

    def test_a_literal_that_changes_only_at_the_full_size_is_not_proven(self):
        identity = self.compare(functools.partial(matmul, full_size_tweak="scale"))
        self.assertFalse(identity.proven)
        self.assertTrue(any("literal" in reason and "0.5" in reason for reason in identity.unproven),
                        identity.unproven)

    def test_a_precision_that_changes_only_at_the_full_size_is_a_structural_difference(self):
        identity = self.compare(functools.partial(matmul, full_size_tweak="precision"))
        self.assertIn("precision", identity.structural)

    def test_sizes_that_all_change_alike_prove_nothing(self):
        identity = self.compare(matmul, DOUBLED)
        self.assertFalse(identity.proven)
        self.assertTrue(any("do not separate" in reason for reason in identity.unproven), identity.unproven)

    def test_a_count_minus_one_is_proven(self):
        identity = self.compare(clamped_block_index)
        self.assertTrue(identity.proven, list(program_identity.iter_reasons(identity)))

    def test_a_constant_table_that_changes_with_the_sizes_is_not_proven_but_not_refused(self):
        identity = self.compare(with_numpy_table)
        self.assertFalse(identity.structural)
        self.assertIn("constant array", identity.unproven[0])

    def test_a_loop_unrolled_by_a_size_dependent_count_is_not_proven(self):
        identity = self.compare(unrolled_by_size)
        self.assertFalse(identity.proven)
        self.assertFalse(identity.structural)
        self.assertIn("repeat a step", identity.unproven[0])


if __name__ == "__main__":
    unittest.main()
