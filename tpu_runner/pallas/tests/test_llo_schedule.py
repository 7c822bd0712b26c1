"""llo_schedule.py and pipeline_model.py without jax: trip counts read from a loop's start, bound
and step; the kernel's own DMAs priced by their bytes and latency; a single-step grid priced as
fetch + compute + write-back.

    build/pallas-venv/bin/python -m unittest discover -s tpu_runner/pallas/tests -v

The golden files in data/ are whole final schedules from deviceless v6e compiles (jax 0.10.2,
libtpu 0.0.42.1) of silu_mul kernels at the task's full size (2^24 floats):
tests/adversarial_pallas/estimate_static_loop, estimate_negative_loop_start,
estimate_serial_small_dmas and estimate_primed_serial_dmas, and tests/fixtures/pallas_estimate/
manual_double_buffer.py and emit_pipeline_silu.py; v6e_copy_loop_{once,double} are
tests/fixtures/pallas_estimate/copy_loop_in_the_grid.py (a copy loop nested in the grid loop).
"""
from __future__ import annotations

import pathlib
import sys
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kernelgym_pallas import llo_schedule, pipeline_model  # noqa: E402

DATA = HERE / "data"
V6E_LATENCY, V6E_BYTES_PER_CYCLE = 530, 1638e9 / 1.246e9


def golden(name: str) -> llo_schedule.Schedule:
    files = sorted(DATA.glob(f"v6e_{name}_*-final_bundles.txt"))
    assert len(files) == 1, files
    return llo_schedule.parse_schedule(files[0].read_text())


def loop(start: int, bound: int, step: int = 1, cc: str = "ge", body: int = 3) -> str:
    """A loop as libtpu writes it: the counter's start in a register, a phi, the step, the exit
    test, the branch back (constants as unsigned 32-bit numbers)."""
    u32 = lambda v: v & 0xFFFFFFFF  # noqa: E731
    lines = [f"     0   :  {{ %s1_s1 = smov {u32(start)} /* copy for cssa */ }}",
             "   0x1 LB: > { %s2_s2 = sphi %s1_s1, %s9_s2 /* phi copy */  ;;  "
             f"%s3_s3 = sadd.s32 {u32(step)}, %s2_s2 }} /* Start region 40 */"]
    lines += [f"   0x{2 + i:x}   : > {{ %v{10 + i}_v1 = vadd.f32 %v1_v1, %v1_v1 }}" for i in range(body - 2)]
    lines += [f"   0x{body:x}   : > {{ %p4_p1 = scmp.{cc}.s32.totalorder %s3_s3, {u32(bound)}  ;;  "
              "%s9_s2 = smov %s3_s3  ;;  %5 = sbr.rel (!%p4_p1) target = $region40 }",
              f"   0x{body + 1:x}   :  {{ %6 = shalt }}"]
    return "\n".join(lines) + "\n"


class TripCounts(unittest.TestCase):
    def trips(self, text):
        schedule = llo_schedule.parse_schedule(text)
        self.assertEqual(len(schedule.loops), 1)
        return schedule.loops[0][1]

    def test_from_start_bound_and_step(self):
        self.assertEqual(self.trips(loop(0, 64)), 64)
        self.assertEqual(self.trips(loop(3, 67)), 64)
        # The exit test compares with 0: read alone, this loop was one trip.
        self.assertEqual(self.trips(loop(-4, 0)), 4)
        # Its constant prints as 3,294,967,296: read alone, billions of trips.
        self.assertEqual(self.trips(loop(-1_000_000_064, -1_000_000_000)), 64)
        self.assertEqual(self.trips(loop(0, 64, step=2)), 32)
        self.assertEqual(self.trips(loop(0, 63, step=2)), 32)
        self.assertEqual(self.trips(loop(0, 64, cc="gt")), 65)
        self.assertEqual(self.trips(loop(64, 0, step=-1, cc="le")), 64)
        self.assertEqual(self.trips(loop(0, 64, cc="eq")), 64)

    def test_what_cannot_be_known_is_refused(self):
        # A bound in a register that is not a constant: no count, never a guess.
        text = loop(0, 64).replace("%s3_s3, 64", "%s3_s3, %s7_s7")
        self.assertIsNone(self.trips(text))
        # A start that is not a constant (a scalar read at run time).
        self.assertIsNone(self.trips(loop(0, 64).replace("smov 0 ", "sld [smem:[#allocation3]] ")))
        # A loop that never exits by its test (counting down to a larger bound).
        self.assertIsNone(self.trips(loop(0, 64, step=-1)))
        # A step of zero.
        self.assertIsNone(self.trips(loop(0, 64, step=0)))
        # An exit test that is not a comparison of the counter.
        self.assertIsNone(self.trips(loop(0, 64).replace("scmp.ge.s32.totalorder %s3_s3, 64", "por %p8_p8, %p9_p9")))

    def test_a_start_moved_in_a_branch_delay_slot(self):
        # The start set by a move predicated on the fall-through path of the branch before the loop
        # (v5e, paged attention's copy loops: `%s3149_s30 = smov (!%p127_p10), 0` in the delay slot
        # of `sbr.rel (%p127_p10)`): that move is the start's only definition, so the start is 0.
        # Read as unknown before, each such loop was counted once and the estimate untrusted.
        for guard in ("(!%p7_p7)", "(%p7_p7)"):
            with self.subTest(guard=guard):
                self.assertEqual(self.trips(loop(0, 64).replace("smov 0 ", f"smov {guard}, 0 ")), 64)
                self.assertEqual(self.trips(loop(-4, 0).replace("smov 4294967292 ", f"smov {guard}, 4294967292 ")), 4)
        # With a fallback value (`smov (%p, %y), K`: K where p holds, else %y) it is a select of two
        # values, and a guard on a register that is not a predicate is not this form: no count.
        self.assertIsNone(self.trips(loop(0, 64).replace("smov 0 ", "smov (%p7_p7, %s8_s8), 0 ")))
        self.assertIsNone(self.trips(loop(0, 64).replace("smov 0 ", "smov (%s7_s7), 0 ")))

    def test_a_counter_kept_in_a_spill_slot(self):
        # An XLA fusion whose loop body runs out of scalar registers keeps its counter in a spill
        # slot: the phi is stored, and the increment reads it back (1p's attention scores: 1,282
        # trips, counted once before). One store to the slot: followed; two: no count.
        spilled = loop(0, 64, body=5).replace(
            "%s3_s3 = sadd.s32 1, %s2_s2 }",
            "%12 = sst [smem:[#allocation21_spill]] %s2_s2 }").replace(
            "   0x2   : > { %v10_v1 = vadd.f32 %v1_v1, %v1_v1 }",
            "   0x2   : > { %s20_s20 = sld [smem:[#allocation21_spill]] }").replace(
            "   0x3   : > { %v11_v1 = vadd.f32 %v1_v1, %v1_v1 }",
            "   0x3   : > { %s3_s3 = sadd.s32 1, %s20_s20 }")
        self.assertIn("sld [smem:[#allocation21_spill]]", spilled)
        self.assertEqual(self.trips(spilled), 64)
        twice = spilled.replace("   0x4   : > { %v12_v1 = vadd.f32 %v1_v1, %v1_v1 }",
                                "   0x4   : > { %13 = sst [smem:[#allocation21_spill]] %s7_s7 }")
        self.assertNotEqual(twice, spilled)
        self.assertIsNone(self.trips(twice))

    def test_golden_negative_start(self):
        # estimate_negative_loop_start: fori_loop(-4, 0) inside the grid loop (512 steps + 2 stages).
        schedule = golden("neg_loop")
        self.assertEqual([trips for _, trips, _ in schedule.loops], [4, 514])
        static = golden("static_loop")  # the same kernel with fori_loop(0, 4)
        self.assertEqual(schedule.executed, static.executed)

    def test_golden_loop_closed_by_its_branch(self):
        # The hand-written double buffer's loop has no commented exit test: its branch back names it.
        schedule = golden("double_buffer")
        self.assertEqual(schedule.loops, [(1, 512, 147)])
        self.assertEqual(schedule.unknown_trips, 0)


class DmaPricing(unittest.TestCase):
    def test_golden_serial_small_copies_pay_their_latency(self):
        # Three 4 KiB copies a chunk, each awaited before the next starts, 16,384 chunks.
        schedule = golden("serial_dma")
        self.assertEqual(schedule.loops, [(1, 16384, 53)])
        starts = [e for e in schedule.dma if e.kind == "start"]
        self.assertEqual([e.bytes for e in starts], [4096.0] * 3)
        self.assertFalse(any(e.pipeline for e in schedule.dma))
        self.assertEqual(schedule.dma_bytes(pipeline=False), 3 * 16384 * 4096)
        stall = llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        # Nothing covers a copy that is awaited right after its start: the whole latency, each time.
        self.assertGreater(stall, 3 * 16384 * (V6E_LATENCY - 5))
        self.assertLess(stall, 3 * 16384 * (V6E_LATENCY + 5))
        # Before, a wait was one bundle: the schedule's 868,370 bundles were the whole price.
        self.assertGreater(stall, 20 * schedule.executed)

    def test_golden_double_buffer_overlaps_its_copies(self):
        # Each chunk's copies were started a trip earlier, into the other slot: running the
        # schedule's scalar code gives every start and wait its slot, and a trip's bundles cover
        # part of each copy.
        schedule = golden("double_buffer")
        starts = [e for e in schedule.dma if e.kind == "start"]
        self.assertTrue(starts and not any(e.pipeline for e in schedule.dma))
        loop = schedule.innermost[[e for e in schedule.dma if e.kind == "wait"][0].bundle]
        events = llo_schedule._play(schedule, loop, 3)
        self.assertIsNotNone(events)
        waits = [(trip, flag) for trip, _, kind, flag, _ in events if kind == "wait"]
        # The inputs' flags alternate between slots 0/2 (trip 0, primed before the loop) and 1/3.
        self.assertEqual([flag for trip, flag in waits if trip == 0][:2], [("allocation5", 0), ("allocation5", 2)])
        self.assertEqual([flag for trip, flag in waits if trip == 1][:2], [("allocation5", 1), ("allocation5", 3)])
        stall = llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        copy = V6E_LATENCY + 131072 / V6E_BYTES_PER_CYCLE   # one 256x128 float32 chunk
        per_trip = stall / 512
        # Overlapped: less than one unhidden copy a trip, although the trip's three copies (two
        # inputs, one output) share the bandwidth (`test_pieces_started_together_share_the_bandwidth`;
        # before that, each copy moved at the whole bandwidth and the stall was under half a copy).
        self.assertLess(per_trip, copy)
        self.assertGreater(per_trip, 0)                      # the bundles do not cover it all
        # ... and no faster than the trip's bytes at the chip's bandwidth.
        trip_bytes = schedule.dma_bytes(pipeline=False) / 512
        self.assertGreaterEqual(per_trip + schedule.executed / 512, trip_bytes / V6E_BYTES_PER_CYCLE)

    def test_golden_emit_pipeline_is_matched_a_trip_ahead(self):
        # emit_pipeline waits for the previous step's output copy right after starting this
        # step's: by slot, that wait is for the copy a trip old, not the one just started.
        schedule = golden("emit_pipe")
        stall = llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        copy = V6E_LATENCY + 131072 / V6E_BYTES_PER_CYCLE
        self.assertLess(stall / 512, copy / 2)
        # Taken as waiting for the copy just started, it paid a copy a trip and more.
        by_nearest = llo_schedule._nearest_start_stalls(
            schedule, schedule.innermost[[e for e in schedule.dma if e.kind == "wait"][0].bundle],
            [e for e in schedule.dma if e.kind == "wait" and schedule.innermost[e.bundle] is not None],
            V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        self.assertGreater(by_nearest / 512, copy)

    def test_golden_decoy_before_the_loop_earns_nothing(self):
        # estimate_primed_serial_dmas: the serial copies behind a decoy started on another slot
        # before the loop. Each wait is its own slot's copy, issued just before it.
        primed, serial = golden("primed_serial"), golden("serial_dma")
        stall = llo_schedule.manual_dma_stall_cycles(primed, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        self.assertGreater(stall, 3 * 16384 * (V6E_LATENCY - 5))
        self.assertGreater(stall, 0.95 * llo_schedule.manual_dma_stall_cycles(serial, V6E_LATENCY, V6E_BYTES_PER_CYCLE))

    def test_golden_grid_pipeline_copies_are_left_to_the_grid_model(self):
        schedule = golden("static_loop")
        self.assertTrue(schedule.dma and all(e.pipeline for e in schedule.dma))
        self.assertEqual(llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE), 0)
        self.assertEqual(schedule.dma_bytes(pipeline=False), 0)

    def test_golden_copy_loop_in_the_grid_loop_is_played(self):
        # Step i's copy loop (nested in the grid loop) starts step i + 1's 16 copies into the other
        # slot; the grid loop's one wait is for its own slot's whole buffer. The nested loop is
        # run trip by trip, so the wait is matched with the copies started a step earlier.
        schedule = golden("copy_loop_double")
        wait = [e for e in schedule.dma if e.kind == "wait" and not e.pipeline][-1]
        grid = schedule.innermost[wait.bundle]
        self.assertEqual(grid.trips, 65)
        events = llo_schedule._play(schedule, grid, 4)
        self.assertIsNotNone(events)
        starts = [[flag for trip, _, kind, flag, _ in events if trip == t and kind == "start"] for t in range(4)]
        # step 0 primes its own slot under `pl.when(i == 0)` and starts step 1's: 32 copies; every
        # later step only the next step's 16 (the branch around the priming loop is run: it skips)
        self.assertEqual([len(s) for s in starts], [32, 16, 16, 16])
        self.assertEqual([s[-1] for s in starts], [("allocation3", 1), ("allocation3", 0), ("allocation3", 1),
                                                   ("allocation3", 0)])
        stall = llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        copy = V6E_LATENCY + 16 * 4096 / V6E_BYTES_PER_CYCLE   # a step's buffer, started and awaited at once
        # A step's compute covers the next step's copies: far less than a copy a step (before the
        # nested loop was played, each wait found no start and paid a whole copy: 64 x 580 cycles).
        self.assertLess(stall, 0.1 * 64 * copy)
        self.assertGreater(stall, 0)                         # step 0 waits for the copies it just primed

    def test_golden_one_wait_for_a_copy_loop_waits_for_all_of_it(self):
        # Each step starts its own 16 copies in a nested loop and waits at once for the whole
        # buffer: the wait consumes all 16 (not the oldest alone), so it lasts until the last
        # one is done: a latency at least each step, as no compute lies between.
        schedule = golden("copy_loop_once")
        stall = llo_schedule.manual_dma_stall_cycles(schedule, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        self.assertGreater(stall / 64, V6E_LATENCY)
        self.assertLess(stall / 64, V6E_LATENCY + 16 * 4096 / V6E_BYTES_PER_CYCLE + 1)

    def test_a_wait_for_more_than_one_copy_consumes_the_next_ones(self):
        # Four 1 KiB copies on one flag, then a wait for 4 KiB: done when all four are, and the
        # flag has nothing left for a later wait (which stalls a whole copy).
        events = [(0, 0.0, "start", ("a", 0), 1024.0) for _ in range(4)]
        events += [(0, 0.0, "wait", ("a", 0), 4096.0), (1, 10_000.0, "wait", ("a", 0), 1024.0)]
        stalls = llo_schedule._stalls_by_trip(events, V6E_LATENCY, V6E_BYTES_PER_CYCLE)
        self.assertAlmostEqual(stalls[0], V6E_LATENCY + 4096 / V6E_BYTES_PER_CYCLE)
        self.assertAlmostEqual(stalls[1], V6E_LATENCY + 1024 / V6E_BYTES_PER_CYCLE)

    def test_pieces_started_together_share_the_bandwidth(self):
        # One 128 KiB copy, or the same bytes as 8 pieces on 8 flags started together and awaited
        # together (outside red team, round 5: each piece was done at latency + its own bytes, as if
        # each had the chip's whole bandwidth, so splitting priced the copy 1.26x faster). Bytes in
        # flight share the bandwidth: the last piece is done when the whole copy would have been.
        size = 131072.0
        one = [(-1, 0.0, "start", ("a", 0), size), (-1, 1.0, "wait", ("a", 0), size)]
        pieces = [(-1, 0.0, "start", ("a", k), size / 8) for k in range(8)] + \
            [(-1, 1.0, "wait", ("a", k), size / 8) for k in range(8)]
        whole = llo_schedule._stalls_by_trip(one, V6E_LATENCY, V6E_BYTES_PER_CYCLE)[-1]
        split = llo_schedule._stalls_by_trip(pieces, V6E_LATENCY, V6E_BYTES_PER_CYCLE)[-1]
        self.assertAlmostEqual(whole, V6E_LATENCY + size / V6E_BYTES_PER_CYCLE - 1.0)
        self.assertAlmostEqual(split, whole, delta=1e-6 * whole)
        # A copy started after the first one's bytes moved is not queued behind it.
        apart = [(-1, 0.0, "start", ("a", 0), size), (-1, 1e6, "start", ("a", 1), size),
                 (-1, 1e6 + 1.0, "wait", ("a", 1), size)]
        self.assertAlmostEqual(llo_schedule._stalls_by_trip(apart, V6E_LATENCY, V6E_BYTES_PER_CYCLE)[-1], whole)

    def test_size_in_a_register_is_unknown(self):
        text = ("     0   :  { %s1_s1 = sld [smem:[#allocation2]] }\n"
                "   0x1   :  { %2 = dma.hbm_to_vmem [thread:$0]  /*hbm=*/%s3, /*size_in_granules=*/%s1_s1, "
                "/*vmem=*/%s4, /*dst_syncflagno=*/[#allocation5] }\n"
                "   0x2   :  { %5 = dma.done.wait [#allocation5], %s1_s1 }\n")
        schedule = llo_schedule.parse_schedule(text)
        self.assertEqual(schedule.unknown_dma_sizes, 2)


def windowed_copy(trips: int, guard: str = "") -> str:
    """An XLA fusion's window loop: each trip copies a window whose size is in a register (its
    last window may be smaller) and waits for a constant number of granules (1024), the wait
    optionally predicated on `guard` (the predicate `%p6_p6`, defined from the counter)."""
    text = loop(0, trips, body=6)
    text = text.replace(
        "   0x2   : > { %v10_v1 = vadd.f32 %v1_v1, %v1_v1 }",
        "   0x2   : > { %p6_p6 = scmp.ge.s32.totalorder %s2_s2, 2  ;;  %p7_p7 = scmp.eq.s32.totalorder %s8_s8, 3 }")
    text = text.replace(
        "   0x3   : > { %v11_v1 = vadd.f32 %v1_v1, %v1_v1 }",
        "   0x3   : > { %20 = dma.vmem_to_hbm [thread:$0]  /*vmem=*/%s21_s21, /*size_in_granules=*/%s22_s22, "
        "/*hbm=*/%s23_s23, /*dst_syncflagno=*/[#allocation5] }")
    wait = f"dma.done.wait {'(' + guard + '), ' if guard else ''}[#allocation5], 1024"
    return text.replace("   0x4   : > { %v12_v1 = vadd.f32 %v1_v1, %v1_v1 }",
                        f"   0x4   : > {{ %24 = {wait} /* pipeline-emitter-dma-wait */ }}")


class CopiesSizedInRegisters(unittest.TestCase):
    # Each wait's granules count where the copies' sizes are known only at run time (the bytes a
    # 1p attention's score fusion writes: 8.6 GB, none of it counted before).
    def test_unguarded_wait_counts_every_trip(self):
        schedule = llo_schedule.parse_schedule(windowed_copy(10))
        self.assertEqual(schedule.loops[0][1], 10)
        self.assertEqual(schedule.unknown_dma_sizes, 1)
        self.assertEqual(schedule.executed_dma_bytes(), 10 * 1024 * 32)

    def test_stage_guard_counts_the_trips_it_holds_on(self):
        # `counter >= 2`: a software pipeline's write-back waits from its third trip on.
        self.assertEqual(llo_schedule.parse_schedule(windowed_copy(10, "%p6_p6")).executed_dma_bytes(),
                         8 * 1024 * 32)
        self.assertEqual(llo_schedule.parse_schedule(windowed_copy(10, "!%p6_p6")).executed_dma_bytes(),
                         2 * 1024 * 32)

    def test_other_guards_count_nothing(self):
        # A predicate on anything but the loop's counter (the last step of a contraction): how
        # often it holds is not known, so the wait adds nothing (never a guess upward).
        self.assertEqual(llo_schedule.parse_schedule(windowed_copy(10, "%p7_p7")).executed_dma_bytes(), 0.0)


def copy_every_fourth_trip(trips: int, index: str = "%s4_s4 = sand.u32 3, %s2_s2") -> str:
    """An XLA fusion's fetch of an operand window that changes every fourth trip: the copy and its
    wait sit in a block that a forward branch skips while `index != 0` (`index` defines %s4_s4)."""
    return "\n".join([
        "     0   :  { %s1_s1 = smov 0 /* copy for cssa */ }",
        "   0x1 LB: > { %s2_s2 = sphi %s1_s1, %s9_s2  ;;  %s3_s3 = sadd.s32 1, %s2_s2 } /* Start region 40 */",
        f"   0x2   : > {{ {index} }}",
        "   0x3   : > { %p5_p5 = scmp.ne.s32.totalorder %s4_s4, 0 }",
        "   0x4   : > { %6 = sbr.rel (%p5_p5) target = $region41 }",
        "   0x5   : > { %7 = dma.hbm_to_vmem [thread:$0]  /*hbm=*/%s20_s20, /*size_in_granules=*/1024, "
        "/*vmem=*/%s21_s21, /*dst_syncflagno=*/[#allocation5] }",
        "   0x6   : > { %8 = dma.done.wait [#allocation5], 1024 }",
        "   0x7 PF: > { %p10_p1 = scmp.ge.s32.totalorder %s3_s3, " + str(trips) + "  ;;  %s9_s2 = smov %s3_s3 }"
        " /* Start/End empty region 41 */",
        "   0x8   : > { %11 = sbr.rel (!%p10_p1) target = $region40 }",
        "   0x9   :  { %12 = shalt }",
    ]) + "\n"


class CopiesAsTheLoopRunsThem(unittest.TestCase):
    """An XLA fusion's copies counted on the trips its own scalar code runs them (the branches
    around them, their predicates), and its streams added: the retention scores of JAXBench's 15p
    (decay windows and scores, 9.1 ms of copies where 6.6 ms were counted) were below measured."""

    def test_a_copy_in_a_skipped_block_counts_the_trips_it_runs(self):
        schedule = llo_schedule.parse_schedule(copy_every_fourth_trip(10))
        self.assertEqual(schedule.loops[0][1], 10)
        # Trips 0, 4 and 8 fetch; every trip was counted before (10 x 32 KiB).
        self.assertEqual(schedule.executed_dma_bytes(), 3 * 1024 * 32)

    def test_a_condition_that_cannot_be_run_counts_as_before(self):
        # The window index comes from memory (not a spill slot): not run, so every trip counts.
        text = copy_every_fourth_trip(10, index="%s4_s4 = sld [smem:[#allocation9]]")
        self.assertEqual(llo_schedule.parse_schedule(text).executed_dma_bytes(), 10 * 1024 * 32)

    def test_golden_fusion_result_written_once_a_window(self):
        # A deviceless v6e compile (jax 0.10.2, libtpu 0.0.42.1) of a retention of our own: B=2, H=16,
        # S=4096, D=256, bf16 q, k, v; the decay exp(log(1 - 2^(-5-h)) * max(i - j, 0)) * (i >= j);
        # s = einsum(q, k) in float32 * decay, divided by max(sum |s|, 1); out = einsum(s in bf16, v).
        # XLA's second fusion (s, decay, v -> out), its vector slots left out of the file (the scalar
        # code, DMAs and syncs kept). 418 trips: 416 read a 5 MiB window of s, a 2.5 MiB window of the
        # decay and 320 KiB of v; the 2 MiB result window is written on 32 of them (once for each of
        # the 2 x 16 x 4096 x 256 result's windows), its start and wait behind branches and guards.
        schedule = golden("retention_av")
        self.assertEqual(schedule.loops[0][1], 418)
        counts = llo_schedule.guard_trip_counts(schedule)
        starts = {e.bundle: e for e in schedule.dma if e.kind == "start" and e.granules == 65536}
        self.assertEqual(len(starts), 1)
        self.assertEqual(counts[next(iter(starts))], 32)
        waits = [e for e in schedule.dma if e.kind == "wait" and e.granules in (163840, 81920, 10240)]
        self.assertEqual(sorted(counts[e.bundle] for e in waits), [416, 416, 416])
        # The streams added: scores + decay and v + the result (2 x 16 x 4096 x 256 bf16, 64 MiB).
        expected = (163840 + 81920 + 10240) * 32 * 416 + 2 * 16 * 4096 * 256 * 2
        self.assertEqual(schedule.executed_dma_bytes(), expected)
        # Before: all starts (the result's, at every trip but two) against all waits, the larger:
        # 2.33 GB, the decay and v's reads left out.
        self.assertGreater(schedule.executed_dma_bytes(), 1.45 * (163840 + 10240) * 32 * 418)


class SingleStepPricing(unittest.TestCase):
    def test_one_step_overlaps_nothing(self):
        traffic = pipeline_model.BlockTraffic(steps=1, first_in=8e6, last_out=4e6, total_in=8e6, total_out=4e6)
        seconds = pipeline_model.pipeline_seconds(10e-6, traffic, 1e12)
        self.assertAlmostEqual(seconds, 8e-6 + 10e-6 + 4e-6)   # fetch + compute + write-back
        self.assertGreater(seconds, max(10e-6, 12e-6))           # not the larger of the two

    def test_many_steps_overlap_all_but_the_ends(self):
        steps = 64
        traffic = pipeline_model.BlockTraffic(steps, first_in=2e5, last_out=1e5, total_in=2e5 * steps,
                                              total_out=1e5 * steps)
        compute = 64 * 1e-6                                       # 1 us a step, 0.3 us of copies a step
        seconds = pipeline_model.pipeline_seconds(compute, traffic, 3e11)
        self.assertAlmostEqual(seconds, 2e5 / 3e11 + 63 * 1e-6 + 1e-6 + 1e5 / 3e11)
        bound = pipeline_model.pipeline_seconds(1e-6, traffic, 3e11)   # copies dominate
        self.assertAlmostEqual(bound, 2e5 / 3e11 + 63 * 3e5 / 3e11 + 1e-6 / 64 + 1e5 / 3e11)


if __name__ == "__main__":
    unittest.main()
