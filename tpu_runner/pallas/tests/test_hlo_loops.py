"""Static trip counts of HLO while loops (kernelgym_pallas/hlo_loops.py), on module text written
as libtpu's optimized HLO prints it (tuple shapes with tiled layouts, `.sunk` bodies)."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kernelgym_pallas import hlo_loops  # noqa: E402

STATE = "(s32[]{:T(128)}, f32[32,8,128]{2,1,0:T(8,128)}, /*index=2*/s32[]{:T(128)})"


def loop_module(start="0", limit="32", step="1", direction="LT", counter_first=True, inner=""):
    """An ENTRY with one while loop over STATE whose element 0 counts from `start` to `limit`."""
    compare = "%gte.c, %limit" if counter_first else "%limit, %gte.c"
    return f"""HloModule jit_reference, entry_computation_layout={{(f32[32,8,128]{{2,1,0}})->f32[32,8,128]{{2,1,0}}}}

%fused_computation.1 (param_0: f32[8,128]) -> f32[8,128] {{
  %param_0 = f32[8,128]{{1,0}} parameter(0)
  ROOT %exp.1 = f32[8,128]{{1,0}} exponential(%param_0)
}}

%body.sunk (arg.0: {STATE}) -> {STATE} {{
  %one = s32[]{{:T(128)}} constant({step})
  %arg.0 = {STATE} parameter(0)
  %gte.i = s32[]{{:T(128)}} get-tuple-element(%arg.0), index=0
  %gte.x = f32[32,8,128]{{2,1,0:T(8,128)}} get-tuple-element(%arg.0), index=1
  %work = f32[32,8,128]{{2,1,0:T(8,128)S(1)}} fusion(%gte.x), kind=kLoop, calls=%fused_computation.1, metadata={{op_name="jit(reference)/while/body/exp"}}
  {inner}
  %next = s32[]{{:T(128)}} add(%gte.i, %one), metadata={{op_name="jit(reference)/while/body/add"}}
  %gte.n = s32[]{{:T(128)}} get-tuple-element(%arg.0), index=2
  ROOT %tuple.b = {STATE} tuple(%next, %work, %gte.n)
}}

%cond (arg.1: {STATE}) -> pred[] {{
  %limit = s32[]{{:T(128)}} constant({limit})
  %arg.1 = {STATE} parameter(0)
  %gte.c = s32[]{{:T(128)}} get-tuple-element(%arg.1), index=0
  ROOT %lt = pred[]{{:T(512)}} compare({compare}), direction={direction}, metadata={{op_name="jit(reference)/while/cond/lt"}}
}}

ENTRY %main.9 (x.1: f32[32,8,128]) -> f32[32,8,128] {{
  %zero = s32[]{{:T(128)}} constant({start})
  %x.1 = f32[32,8,128]{{2,1,0:T(8,128)}} parameter(0)
  %copy.8 = s32[]{{:T(128)}} copy(%zero)
  %n = s32[]{{:T(128)}} constant(7)
  %tuple.9 = {STATE} tuple(%copy.8, %x.1, %n)
  %while = {STATE} while(%tuple.9), condition=%cond, body=%body.sunk, backend_config={{"flag_configs":[]}}
  ROOT %out = f32[32,8,128]{{2,1,0:T(8,128)}} get-tuple-element(%while), index=1
}}
"""


class TripCounts(unittest.TestCase):
    def test_a_counted_loop_runs_its_body_limit_minus_start_times(self):
        loops = hlo_loops.module_loops(loop_module())
        self.assertEqual(loops.entry, "main.9")
        self.assertEqual(loops.runs["main.9"], 1)
        self.assertEqual(loops.runs["body.sunk"], 32)
        self.assertEqual(loops.runs_of_instruction("work"), 32)
        self.assertEqual(loops.runs_of_instruction("copy.8"), 1)
        self.assertIsNone(loops.runs_of_instruction("no_such_op"))
        self.assertEqual(hlo_loops.module_loops(loop_module(start="4")).runs["body.sunk"], 28)

    def test_a_counter_copied_before_its_step(self):
        # XLA copies the counter into another memory space before adding 1 (JAXBench 11p's loop
        # over 128 experts): the same loop, counted.
        text = loop_module().replace(
            "  %next = s32[]{:T(128)} add(%gte.i, %one)",
            "  %copy.5 = s32[]{:T(128)S(6)} copy(%gte.i)\n  %next = s32[]{:T(128)} add(%copy.5, %one)")
        self.assertIn("add(%copy.5, %one)", text)
        self.assertEqual(hlo_loops.module_loops(text).runs["body.sunk"], 32)

    def test_a_reversed_comparison_is_the_same_loop(self):
        loops = hlo_loops.module_loops(loop_module(direction="GT", counter_first=False))
        self.assertEqual(loops.runs["body.sunk"], 32)

    def test_anything_but_the_canonical_loop_has_no_count(self):
        for name, text in {
            "step 2": loop_module(step="2"),
            "a bound that is not a constant": loop_module(limit="").replace("constant()", "parameter(1)"),
            "<= instead of <": loop_module(direction="LE"),
            "the counter on the wrong side": loop_module(counter_first=False),
        }.items():
            with self.subTest(name):
                loops = hlo_loops.module_loops(text)
                self.assertIsNone(loops.runs["body.sunk"])
                self.assertIsNone(loops.runs_of_instruction("work"))
                self.assertEqual(loops.runs["main.9"], 1)

    def test_a_body_two_loops_share_has_no_single_count(self):
        text = loop_module().replace(
            "  ROOT %out =",
            "  %again = " + STATE + " while(%tuple.9), condition=%cond, body=%body.sunk\n  ROOT %out =")
        self.assertIsNone(hlo_loops.module_loops(text).runs["body.sunk"])

    def test_nested_loops_multiply(self):
        outer = loop_module(limit="4")
        inner_body = loop_module(limit="8").split("%body.sunk", 1)[1].split("ENTRY", 1)[0]
        inner_body = "%inner.sunk" + inner_body.replace("%cond (", "%inner.cond (")
        # The outer body runs an inner loop over the same state.
        outer = outer.replace(
            "  %next = s32[]{:T(128)} add(%gte.i, %one)",
            "  %z = s32[]{:T(128)} constant(0)\n"
            f"  %t = {STATE} tuple(%z, %work, %gte.i)\n"
            f"  %w2 = {STATE} while(%t), condition=%inner.cond, body=%inner.sunk\n"
            "  %next = s32[]{:T(128)} add(%gte.i, %one)")
        loops = hlo_loops.module_loops(inner_body + "\n" + outer)
        self.assertEqual(loops.runs["body.sunk"], 4)
        self.assertEqual(loops.runs["inner.sunk"], 32)

    def test_a_computation_reached_otherwise_has_no_count(self):
        loops = hlo_loops.module_loops(loop_module())
        self.assertIsNone(loops.runs["fused_computation.1"])  # a fusion's body: the fusion is the op
        self.assertIsNone(loops.runs["cond"])


class UncountedLoops(unittest.TestCase):
    def test_an_op_in_a_loop_without_a_static_count_is_flagged(self):
        # A bound that is not a constant (here the state's own element 2): the body's ops run an
        # unknown number of times, and the estimate says so instead of counting them once.
        counted = hlo_loops.module_loops(loop_module())
        self.assertFalse(counted.in_uncounted_loop("work"))
        uncounted = hlo_loops.module_loops(loop_module(step="2"))
        self.assertTrue(uncounted.in_uncounted_loop("work"))
        self.assertFalse(uncounted.in_uncounted_loop("copy.8"))   # in ENTRY
        self.assertFalse(uncounted.in_uncounted_loop("no_such_op"))


if __name__ == "__main__":
    unittest.main()
