"""The most bytes an optimized HLO module's ops can move (kernelgym_pallas/hlo_bytes.py), on module
text written as libtpu prints it (tiled layouts, memory spaces, gathers in kCustom fusions), and the
estimator's use of it: XLA's model never charged more bytes than that (tpu_estimate.model_within_bound).
No jax."""

import pathlib
import sys
import types
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from kernelgym_pallas import hlo_bytes, tpu_estimate  # noqa: E402

# A deviceless v5e compile of jnp.take_along_axis(f32[4096,128], s32[4096,8], axis=1) (jax 0.10.2,
# libtpu 0.0.42.1; metadata left out), and XLA's cost analysis of it as it came back.
TAKE_ALONG_AXIS = (HERE / "data" / "v5e_take_along_axis_hlo.txt").read_text()
TAKE_ALONG_AXIS_COST = {"bytes accessed": 2184848384.0, "bytes accessed0{}": 2154431488.0,
                        "optimal_seconds": 0.0029618609696626663, "flops": 491520.0}


def gather_module(table="f32[65536,128]{1,0:T(8,128)}", rows=8, second_use=""):
    """An ENTRY gathering `rows` rows of 128 floats from `table` in a kCustom fusion (as XLA emits a
    gather on TPU); `second_use` adds an instruction to the fusion body that reads the table too."""
    out = f"f32[{rows},128]{{1,0:T(8,128)}}"
    return f"""HloModule m

%fused_computation (param_0.2: f32[65536,128], param_1.5: s32[{rows}]) -> f32[{rows},128] {{
  %param_0.2 = {table} parameter(0)
  %param_1.5 = s32[{rows}]{{0:T(1024)S(1)}} parameter(1)
  %custom-call.1 = s32[{rows},1]{{1,0:T(8,128)}} custom-call(%param_1.5), custom_call_target="GatherScatterIndicesBitpacked"
  %gather.3 = {out} gather(%param_0.2, %custom-call.1), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,128}}
  {second_use}
  ROOT %copy.1 = {out} copy(%gather.3)
}}

ENTRY %main (t.1: f32[65536,128], i.1: s32[{rows}]) -> f32[{rows},128] {{
  %t.1 = {table} parameter(0)
  %i.1 = s32[{rows}]{{0:T(1024)}} parameter(1)
  ROOT %gather_fusion = {out} fusion(%t.1, %i.1), kind=kCustom, calls=%fused_computation
}}
"""


class LaidOutBytes(unittest.TestCase):
    def test_an_array_holds_its_minor_dimensions_padded_to_its_tile(self):
        # 8 floats in the minor dimension of an (8, 128) tile take 128 lanes; 4096 do not pad.
        self.assertEqual(hlo_bytes.shape_bytes("f32[4096,8]{1,0:T(8,128)}"), 4096 * 128 * 4)
        self.assertEqual(hlo_bytes.shape_bytes("f32[4096,8]{0,1:T(8,128)S(1)}"), 4096 * 8 * 4)
        self.assertEqual(hlo_bytes.shape_bytes("bf16[10,300]{1,0:T(8,128)(2,1)}"), 16 * 384 * 2)
        self.assertEqual(hlo_bytes.shape_bytes("bf16[4096]{0:T(1024)(128)(2,1)S(1)}"), 4096 * 2)
        # no layout: as written; a tuple: its elements added
        self.assertEqual(hlo_bytes.shape_bytes("(f32[2,3], s32[5]{0})"), 24 + 20)


class GatherBounds(unittest.TestCase):
    def test_a_gather_reads_its_indices_and_slices_not_its_operand(self):
        # 8 rows of a 32 MiB table: the fusion moves its 8 indices (a 1024-element tile), the 8 rows
        # it reads and the 8 it writes, nowhere near the table.
        bounds = hlo_bytes.op_bounds(gather_module())
        self.assertEqual(bounds, {"gather_fusion": 1024 * 4 + 2 * 8 * 128 * 4})

    def test_repeated_indices_read_every_slice(self):
        # 16,384 rows gathered from a table of 8,192: each slice is read, more than the table holds
        # (XLA's model counts exactly this for such a gather: 2 x the result + the indices).
        module = gather_module(table="f32[8192,128]{1,0:T(8,128)}", rows=16384)
        self.assertEqual(hlo_bytes.op_bounds(module)["gather_fusion"], 16384 * 4 + 2 * 16384 * 128 * 4)

    def test_an_operand_also_read_otherwise_counts_whole(self):
        # a negation that reaches the root reads the whole table; one that does not reads nothing
        module = gather_module(second_use="%neg.1 = f32[65536,128]{1,0:T(8,128)} negate(%param_0.2)")
        self.assertEqual(hlo_bytes.op_bounds(module)["gather_fusion"], 1024 * 4 + 2 * 8 * 128 * 4)
        module = module.replace("ROOT %copy.1", "%copy.1").replace(
            "copy(%gather.3)\n", "copy(%gather.3)\n  ROOT %t.2 = (f32[8,128]{1,0:T(8,128)}, "
            "f32[65536,128]{1,0:T(8,128)}) tuple(%copy.1, %neg.1)\n")
        self.assertEqual(hlo_bytes.op_bounds(module)["gather_fusion"],
                         1024 * 4 + 8 * 128 * 4 + 65536 * 128 * 4 + 8 * 128 * 4)

    def test_an_operand_is_read_once_per_use(self):
        # the indices reach the gather twice (as XLA's fusion cost analysis counts such uses)
        module = gather_module().replace(
            "custom-call(%param_1.5)",
            "custom-call(%add.2)").replace(
            "  %custom-call.1 =",
            "  %add.2 = s32[8]{0:T(1024)} add(%param_1.5, %param_1.5)\n  %custom-call.1 =")
        self.assertEqual(hlo_bytes.op_bounds(module)["gather_fusion"], 2 * 1024 * 4 + 2 * 8 * 128 * 4)

    def test_the_golden_take_along_axis(self):
        bounds = hlo_bytes.op_bounds(TAKE_ALONG_AXIS)
        # indices s32[32768] (twice: XLA splits each into two bit fields), the gathered f32[4096,8]
        # (as laid out in the gather: 128 lanes a row), the result f32[32768]: not the 2 MiB table
        # once per index.
        self.assertEqual(bounds["gather_fusion"], 2 * 32768 * 4 + 4096 * 128 * 4 + 32768 * 4)
        bound = hlo_bytes.program_bound(TAKE_ALONG_AXIS)
        self.assertIsNotNone(bound.bytes)
        self.assertLess(bound.bytes, 30e6)
        self.assertGreater(TAKE_ALONG_AXIS_COST["bytes accessed"], 80 * bound.bytes)


class LoopsInTheBound(unittest.TestCase):
    def test_an_op_in_a_counted_loop_counts_each_trip(self):
        from test_hlo_loops import loop_module
        one, many = hlo_bytes.program_bound(loop_module(limit="1")), hlo_bytes.program_bound(loop_module(limit="32"))
        # a trip: the body's fusion (its operand and result), the counter's add (three scalars),
        # and the condition's compare (two scalars and a pred)
        trip = 2 * 32 * 8 * 128 * 4 + 3 * 4 + 2 * 4 + 1
        self.assertEqual(many.bytes - one.bytes, 31 * trip)

    def test_a_loop_without_a_static_trip_count_has_no_bound(self):
        from test_hlo_loops import loop_module
        bound = hlo_bytes.program_bound(loop_module(step="2"))
        self.assertIsNone(bound.bytes)
        self.assertIn("run time", bound.why)


class MosaicKernels(unittest.TestCase):
    def test_a_program_with_a_mosaic_kernel_has_no_bound(self):
        # A kernel's grid may fetch an operand's blocks again and again: XLA charges XLA's own
        # ragged-dot kernel (megablox_gmm's reference) 134 MB beyond its operands and result.
        module = gather_module().replace(
            "  ROOT %gather_fusion =",
            "  %k.1 = f32[8,128]{1,0:T(8,128)} custom-call(%i.1), custom_call_target=\"tpu_custom_call\"\n"
            "  ROOT %gather_fusion =")
        bound = hlo_bytes.program_bound(module)
        self.assertIsNone(bound.bytes)
        self.assertIn("k.1", bound.why)
        self.assertEqual(tpu_estimate.model_within_bound(1e-3, {"bytes accessed": 1e12}, module, None, 1e12),
                         (1e-3, 0.0))
        # other custom calls (XLA's index packing, `ConcatBitcast`) are bounded by what they hold
        self.assertIsNotNone(hlo_bytes.program_bound(gather_module()).bytes)


class XlaModelWithinTheBound(unittest.TestCase):
    """XLA's TPU model charges a gather about 64 KiB per gathered element: the golden program is
    charged 2.18 GB, 2,962 us at v5e's 737.7e9 B/s, for ops that hold about 25 MB."""

    def _estimate(self, cost, hlo=TAKE_ALONG_AXIS):
        from kernelgym_pallas import tpu_target
        compiled = tpu_target.Compiled(types.SimpleNamespace(as_text=lambda: hlo), cost, {}, 0.0)
        return tpu_estimate.estimate(target=types.SimpleNamespace(name="v5e"), compiled=compiled)

    def test_a_small_gather_is_priced_by_what_its_ops_read_and_write(self):
        est = self._estimate(TAKE_ALONG_AXIS_COST)
        bandwidth = tpu_estimate.HBM_BYTES_PER_S["v5e"]
        # Every scheduled op's operands and results, whole (no gather rule): what the program holds.
        held = 0.0
        computations, inner = hlo_bytes._parse(TAKE_ALONG_AXIS)
        for name, ops in computations.items():
            shapes = {op.name: op.shape for op in ops}
            for op in ops:
                if name not in inner and op.opcode not in ("parameter", "get-tuple-element", "tuple", "bitcast"):
                    held += hlo_bytes.shape_bytes(op.shape) + sum(hlo_bytes.shape_bytes(shapes[o]) for o in op.operands)
        self.assertLess(held, 40e6)
        # The bytes priced are about what the ops hold (before: 2.18 GB, 86x): at most 5% more, the
        # indices a fusion may read once per use (up to six times in the select: 1 MiB); and so is
        # the time (XLA's figure for them: bytes at the bandwidth, and 0.13 us of its own beside).
        priced = TAKE_ALONG_AXIS_COST["bytes accessed"] - est.xla_excess_bytes
        self.assertLessEqual(priced, 1.05 * held)
        self.assertGreater(est.xla_model_seconds, 0.0)
        self.assertLessEqual(est.xla_model_seconds, 1.06 * held / bandwidth)
        self.assertLessEqual(est.seconds, 1.06 * held / bandwidth)

    def test_a_model_within_the_bound_is_kept(self):
        bound = hlo_bytes.program_bound(TAKE_ALONG_AXIS).bytes
        cost = dict(TAKE_ALONG_AXIS_COST, **{"bytes accessed": bound, "optimal_seconds": 1e-4})
        self.assertEqual(tpu_estimate.model_within_bound(1e-4, cost, TAKE_ALONG_AXIS, None, 1e12), (1e-4, 0.0))
        est = self._estimate(cost)
        self.assertEqual((est.xla_model_seconds, est.xla_excess_bytes), (1e-4, 0.0))

    def test_only_the_excess_is_taken_out(self):
        # XLA's own time for what the ops hold is left: over-charged bytes out at the bandwidth the
        # model prices bytes at, never more.
        bound = hlo_bytes.program_bound(TAKE_ALONG_AXIS).bytes
        seconds, excess = tpu_estimate.model_within_bound(0.003, {"bytes accessed": bound + 1e9}, TAKE_ALONG_AXIS,
                                                          None, 1e12)
        self.assertEqual(excess, 1e9)
        self.assertAlmostEqual(seconds, 0.002, places=12)


if __name__ == "__main__":
    unittest.main()
