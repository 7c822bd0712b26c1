"""The grid pipeline's price (kernelgym_pallas/pipeline_model.py), without a TPU: real Pallas
kernels traced on the CPU, their grid mappings read as the estimate reads them."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from kernelgym_pallas import pipeline_model  # noqa: E402

ROWS, T, D = 16, 4096, 2048  # 256 steps of a (16, 2048) bfloat16 block: 64 KiB in, 64 KiB out
BANDWIDTH = 819e9  # bytes/s (v5e's HBM); any positive figure shows the same ordering


def _scale(x_ref, w_ref, y_ref):
    y_ref[...] = x_ref[...] * w_ref[...]


def _mapping(streamed_mode=None, weight_mode=None):
    """The grid mapping of a row-streaming kernel: x and y walk the rows, w is one fixed block."""
    def kernel(x, w):
        extra = {} if streamed_mode is None else {"pipeline_mode": streamed_mode}
        fixed = {} if weight_mode is None else {"pipeline_mode": weight_mode}
        return pl.pallas_call(
            _scale, grid=(T // ROWS,),
            in_specs=[pl.BlockSpec((ROWS, D), lambda i: (i, 0), **extra),
                      pl.BlockSpec((1, D), lambda i: (0, 0), **fixed)],
            out_specs=pl.BlockSpec((ROWS, D), lambda i: (i, 0), **extra),
            out_shape=jax.ShapeDtypeStruct((T, D), x.dtype))(x, w)
    closed = jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((T, D), jnp.bfloat16),
                                    jax.ShapeDtypeStruct((1, D), jnp.bfloat16))
    return next(e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call").params["grid_mapping"]


class PipelineModelTest(unittest.TestCase):
    def test_single_buffered_blocks_copy_serially_with_compute(self):
        double = pipeline_model.block_traffic(_mapping())
        single = pipeline_model.block_traffic(_mapping(pl.Buffered(1)))
        block = ROWS * D * 2
        self.assertEqual(double.serial, 0.0)
        # x fetched 256 times and y written back 256 times; all but the first fetch and the last
        # write-back wait for a step's compute.
        self.assertEqual(single.serial, 2 * block * (T // ROWS - 1))
        self.assertEqual(single.total, double.total)  # the same bytes, only when they move differs
        # A compute-bound step (2 us, more than the 0.16 us its 128 KiB take): double buffering hides
        # the copies, a single buffer adds them to every step.
        compute = (T // ROWS) * 2e-6
        hidden = pipeline_model.pipeline_seconds(compute, double, BANDWIDTH)
        serial = pipeline_model.pipeline_seconds(compute, single, BANDWIDTH)
        per_step = 2 * block / BANDWIDTH
        self.assertAlmostEqual(serial - hidden, (T // ROWS - 1) * per_step, delta=per_step * 1e-6 * T)
        # Copy-bound (no compute): serial copies are no faster than overlapped ones either.
        self.assertGreaterEqual(pipeline_model.pipeline_seconds(0.0, single, BANDWIDTH),
                                pipeline_model.pipeline_seconds(0.0, double, BANDWIDTH))

    def test_a_single_buffered_block_fetched_once_costs_nothing_more(self):
        # The usual honest use: a weight block whose index never changes, given one buffer to save
        # VMEM, is fetched before the first step and never again.
        double = pipeline_model.block_traffic(_mapping())
        single_weight = pipeline_model.block_traffic(_mapping(weight_mode=pl.Buffered(1)))
        self.assertEqual(single_weight.serial, 0.0)
        self.assertEqual(pipeline_model.pipeline_seconds(1e-3, single_weight, BANDWIDTH),
                         pipeline_model.pipeline_seconds(1e-3, double, BANDWIDTH))


if __name__ == "__main__":
    unittest.main()
