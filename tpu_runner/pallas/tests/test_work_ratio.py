"""The candidate's matmul work against the reference's (kernelgym_pallas/work_ratio.py): real
Pallas programs and a reference traced at three size sets."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import work_ratio  # noqa: E402

K_BY_SET = {"small": 512, "check": 768, "full": 8192}  # 2, 3 and 32 chunks of 256


def _body(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...]


def _chunked_matmul(a3, b3):
    """Sums a3[c] @ b3[c] over the chunks it is given, one grid step each."""
    return pl.pallas_call(
        _body, grid=(a3.shape[0],),
        in_specs=[pl.BlockSpec((None, 128, 256), lambda c: (c, 0, 0)),
                  pl.BlockSpec((None, 256, 128), lambda c: (c, 0, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda c: (0, 0)),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))(a3, b3)


def _chunks(a, b):
    kb = a.shape[1] // 256
    return a.reshape(128, kb, 256).transpose(1, 0, 2), b.reshape(kb, 256, 128)


def honest(a, b):
    return _chunked_matmul(*_chunks(a, b))


def _cut_to(kept):
    def cut(a, b):
        # K/256 zero chunks padded on and the first `kept` kept: all of K at 512 and 768 (2 and 3
        # chunks), `kept` of 32 chunks at 8192
        a3, b3 = _chunks(a, b)
        kb = a3.shape[0]
        return _chunked_matmul(jnp.pad(a3, ((0, kb), (0, 0), (0, 0)))[:kept],
                               jnp.pad(b3, ((0, kb), (0, 0), (0, 0)))[:kept])
    return cut


def _problems(kernel, full_k=K_BY_SET["full"]):
    programs, references = {}, {}
    for name, k in {**K_BY_SET, "full": full_k}.items():
        args = [jax.ShapeDtypeStruct((128, k), jnp.float32), jax.ShapeDtypeStruct((k, 128), jnp.float32)]
        programs[name] = jax.make_jaxpr(kernel)(*args)
        references[name] = jax.make_jaxpr(jnp.matmul)(*args)
    return work_ratio.problems(programs, references, ("small", "check"), "full")


class WorkRatioTest(unittest.TestCase):
    def test_a_kernel_that_does_the_references_work_at_every_size_is_proven(self):
        self.assertEqual(_problems(honest), [])

    def test_operands_cut_to_a_constant_before_the_kernel_are_named_past_the_bound(self):
        # 3 of 32 chunks keeps 0.094 of the share: within the backstop's sixteenth (an honest kernel
        # skipping masked blocks keeps as much; layout_cuts.py names this cut itself), 3 of 64 does not.
        self.assertEqual(_problems(_cut_to(3)), [])
        found = _problems(_cut_to(3), full_k=16384)
        self.assertEqual(len(found), 1, found)
        self.assertIn("matmul FLOPs are 0.0469x the reference's at the full size and 1x at the check sizes", found[0])

    def test_the_kernels_flops_are_its_grid_steps_times_a_steps(self):
        a = jax.ShapeDtypeStruct((128, 768), jnp.float32)
        b = jax.ShapeDtypeStruct((768, 128), jnp.float32)
        self.assertEqual(work_ratio.program_work(jax.make_jaxpr(honest)(a, b)), 2.0 * 128 * 768 * 128)


if __name__ == "__main__":
    unittest.main()
