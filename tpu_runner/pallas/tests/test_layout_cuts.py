"""Data dropped outside the kernels at the full size only (kernelgym_pallas/layout_cuts.py): real
programs traced at three size sets, as the judge gets them."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import layout_cuts, program_identity  # noqa: E402

SETS = ("small", "check", "full")
# (rows, columns) of the one input at each size set: rows 512 / 768 / 8192, columns 256 / 384 / 2048.
SHAPES = {"small": (512, 256), "check": (768, 384), "full": (8192, 2048)}


def _programs(fn, shapes=SHAPES):
    return {name: jax.make_jaxpr(fn)(jax.ShapeDtypeStruct(shapes[name], jnp.float32)) for name in SETS}


def _copy(x):
    """A kernel that copies its operand: its output is opaque to the walk."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


def _found(fn, shapes=SHAPES):
    return layout_cuts.problems(_programs(fn, shapes), SETS)


class Cuts(unittest.TestCase):
    def test_padded_then_cut_to_a_fixed_extent(self):
        # All rows where checked (512, 768 of 768 kept), 768 of 8192 at the full size.
        found = _found(lambda x: jnp.pad(x, ((0, x.shape[0]), (0, 0)))[:768] * 2)
        self.assertEqual(len(found), 1, found)
        self.assertIn("768 of 8192", found[0])

    def test_cut_to_another_sizes_extent(self):
        # Keeps 2 x columns of the rows: all of them where checked (512 <= 512, 768 <= 768), 4096 of 8192
        # at the full size (red team round 16's columns cut on gemm, 2K of N).
        found = _found(lambda x: jnp.pad(x, ((0, x.shape[0]), (0, 0)))[:2 * x.shape[1]] + 1)
        self.assertEqual(len(found), 1, found)
        self.assertIn("4096 of 8192", found[0])

    def test_a_cut_through_reshapes_and_transposes(self):
        def fn(x):
            chunks = x.reshape(x.shape[0] // 256, 256, x.shape[1]).transpose(1, 0, 2)  # (256, R/256, C)
            return jnp.pad(chunks, ((0, 0), (0, chunks.shape[1]), (0, 0)))[:, :3].sum()
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("3 of 32", found[0])

    def test_a_cut_of_a_kernels_output(self):
        # A kernel's output is opaque (its padding counted as data): a share kept that is smaller at
        # the full size than where checked is the cut.
        found = _found(lambda x: _copy(jnp.pad(x, ((0, x.shape[0]), (0, 0))))[:768])
        self.assertEqual(len(found), 1, found)
        found = _found(lambda x: _copy(jnp.pad(x, ((0, x.shape[0]), (0, 0))))[:2 * x.shape[1]])
        self.assertEqual(len(found), 1, found)

    def test_a_kernels_fixed_grid_over_a_padded_operand(self):
        # Row chunks of 256 padded with as many zero chunks; a grid of a fixed 3 steps reads chunks 0-2:
        # all of the data where checked (2 and 3 chunks), 3 of 32 at the full size (red team round 14).
        def fn(x):
            chunks = x.reshape(x.shape[0] // 256, 256, x.shape[1])
            padded = jnp.pad(chunks, ((0, chunks.shape[0]), (0, 0), (0, 0)))

            def body(x_ref, o_ref):
                @pl.when(pl.program_id(0) == 0)
                def _():
                    o_ref[...] = jnp.zeros_like(o_ref)
                o_ref[...] += x_ref[...]
            return pl.pallas_call(body, grid=(3,), out_shape=jax.ShapeDtypeStruct((256, x.shape[1]), x.dtype),
                                  in_specs=[pl.BlockSpec((None, 256, x.shape[1]), lambda k: (k, 0, 0))],
                                  out_specs=pl.BlockSpec((256, x.shape[1]), lambda k: (0, 0)), interpret=True)(padded)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("3 of 32", found[0])

    def test_a_kernels_fixed_grid_of_element_offsets_over_a_padded_operand(self):
        # The same 3 steps reading rows at element offsets (pl.Element) of the rows padded with as many.
        def fn(x):
            padded = jnp.pad(x, ((0, x.shape[0]), (0, 0)))

            def body(x_ref, o_ref):
                @pl.when(pl.program_id(0) == 0)
                def _():
                    o_ref[...] = jnp.zeros_like(o_ref)
                o_ref[...] += x_ref[...]
            return pl.pallas_call(body, grid=(3,), out_shape=jax.ShapeDtypeStruct((256, x.shape[1]), x.dtype),
                                  in_specs=[pl.BlockSpec((pl.Element(256), x.shape[1]), lambda k: (k * 256, 0))],
                                  out_specs=pl.BlockSpec((256, x.shape[1]), lambda k: (0, 0)), interpret=True)(padded)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("768 of 8192", found[0])

    def test_a_kernels_own_copies_of_a_fixed_part_of_a_padded_operand(self):
        # The padded chunks left in HBM, a loop of a fixed 3 trips copying chunks 0-2: all of the data
        # where checked, 3 of 32 chunks at the full size (what the copies read: decision_coverage's).
        def fn(x):
            chunks = x.reshape(x.shape[0] // 256, 256, x.shape[1])
            padded = jnp.pad(chunks, ((0, chunks.shape[0]), (0, 0), (0, 0)))

            def body(x_hbm, o_ref, buf, sem):
                o_ref[...] = jnp.zeros_like(o_ref)

                def step(c, carry):
                    copy = pltpu.make_async_copy(x_hbm.at[c], buf, sem)
                    copy.start()
                    copy.wait()
                    o_ref[...] += buf[...]
                    return carry
                jax.lax.fori_loop(0, 3, step, 0)
            return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((256, x.shape[1]), x.dtype),
                                  in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                                  scratch_shapes=[pltpu.VMEM((256, x.shape[1]), x.dtype), pltpu.SemaphoreType.DMA],
                                  interpret=True)(padded)
        programs = _programs(fn)
        self.assertEqual(layout_cuts.problems(programs, SETS), [])  # without the copies' facts: not seen
        sizes = {name: {"R": SHAPES[name][0], "C": SHAPES[name][1]} for name in SETS}
        facts = program_identity.compare(programs, sizes).facts
        found = layout_cuts.problems(programs, SETS, facts)
        self.assertEqual(len(found), 1, found)
        self.assertIn("copies", found[0])
        self.assertIn("3 of 32", found[0])

    def test_one_input_passed_as_two_operands_each_copied_in_part(self):
        # The row chunks as `x` and `x * 1`: chunk 0 copied from one, chunks 1-2 from the other (each
        # step's copies); neither is read whole anywhere, together they read all 2 and 3 chunks where
        # checked and 3 of 32 at the full size (red team round 17, with one variable: 8.59x on gemm).
        def fn(x):
            chunks = x.reshape(x.shape[0] // 256, 256, x.shape[1])

            def body(first_hbm, rest_hbm, o_ref, buf, sem):
                o_ref[...] = jnp.zeros_like(o_ref)
                copy = pltpu.make_async_copy(first_hbm.at[0], buf, sem)
                copy.start()
                copy.wait()
                o_ref[...] += buf[...]

                def step(c, carry):
                    copy = pltpu.make_async_copy(rest_hbm.at[c], buf, sem)
                    copy.start()
                    copy.wait()
                    o_ref[...] += buf[...]
                    return carry
                jax.lax.fori_loop(1, min(3, rest_hbm.shape[0]), step, 0)
            return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((256, x.shape[1]), x.dtype),
                                  in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
                                  scratch_shapes=[pltpu.VMEM((256, x.shape[1]), x.dtype), pltpu.SemaphoreType.DMA],
                                  interpret=True)(chunks, chunks * 1.0)
        shapes = {"small": (512, 384), "check": (768, 640), "full": (8192, 2048)}  # rows and columns apart
        programs = _programs(fn, shapes)
        sources = list(layout_cuts.operand_sources(programs["small"]).values())
        self.assertEqual(len(sources), 1)
        self.assertEqual(len(sources[0]), 2)
        self.assertIsNotNone(sources[0][0])
        self.assertEqual(sources[0][0], sources[0][1])  # one input's data alike: one operand to the read rules
        sizes = {name: {"R": shapes[name][0], "C": shapes[name][1]} for name in SETS}
        unproven = program_identity.compare(programs, sizes).unproven
        self.assertTrue(any("operand 0" in why and "3 of 32" in why for why in unproven), unproven)

    def test_a_window_of_a_fixed_size_at_a_run_time_start(self):
        def fn(x):
            start = jnp.argmax(x[0]).astype(jnp.int32) * 0
            return jax.lax.dynamic_slice(jnp.pad(x, ((0, x.shape[0]), (0, 0))), (start, 0), (768, x.shape[1]))
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("dynamic_slice", found[0])

    def test_a_fixed_number_of_trips_gathering_chunks_of_columns(self):
        # Red team 28: 3 trips of 128 columns into a buffer 384 wide: all of 256 and 384 where
        # checked, 384 of 2048 at the full size. The loop's output was counted as all data.
        def fn(x):
            def trip(t, buf):
                chunk = jax.lax.dynamic_slice(x, (0, t * 128), (x.shape[0], 128))
                return jax.lax.dynamic_update_slice(buf, chunk, (0, t * 128))
            return _copy(jax.lax.fori_loop(0, 3, trip, jnp.zeros((x.shape[0], 384))))
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("a `scan` keeps", found[0])

    def test_fixed_trips_gathering_from_a_carry_handed_back_behind_a_barrier(self):
        # Red team 29: the source in the carry (not hoisted: an optimization barrier hands it back).
        def fn(x):
            def trip(t, carry):
                buf, src = carry
                chunk = jax.lax.dynamic_slice(src, (0, t * 128), (x.shape[0], 128))
                return jax.lax.dynamic_update_slice(buf, chunk, (0, t * 128)), jax.lax.optimization_barrier(src)
            buf, _ = jax.lax.fori_loop(0, 3, trip, (jnp.zeros((x.shape[0], 384)), x))
            return _copy(buf)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("a `scan` keeps", found[0])

    def test_fixed_trips_gathering_from_what_the_barrier_hands_back(self):
        # The same, the chunks sliced from the barrier's output rather than from the carry itself.
        def fn(x):
            def trip(t, carry):
                buf, src = carry
                src = jax.lax.optimization_barrier(src)
                chunk = jax.lax.dynamic_slice(src, (0, t * 128), (x.shape[0], 128))
                return jax.lax.dynamic_update_slice(buf, chunk, (0, t * 128)), src
            buf, _ = jax.lax.fori_loop(0, 3, trip, (jnp.zeros((x.shape[0], 384)), x))
            return _copy(buf)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("a `scan` keeps", found[0])

    def test_a_chunk_per_trip_written_into_a_buffer_of_a_fixed_width(self):
        # Every column read (a trip per 128 of them), kept in 384: its writes past the end clamp.
        def fn(x):
            def trip(t, buf):
                chunk = jax.lax.dynamic_slice(x, (0, t * 128), (x.shape[0], 128))
                return jax.lax.dynamic_update_slice(buf, chunk, (0, t * 128))
            return _copy(jax.lax.fori_loop(0, x.shape[1] // 128, trip, jnp.zeros((x.shape[0], 384))))
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("a `scan` keeps", found[0])


class NotCuts(unittest.TestCase):
    def test_padding_to_a_block_multiple_sliced_back(self):
        def fn(x):
            rows = x.shape[0]
            padded = jnp.pad(x, ((0, (-rows) % 640), (0, 0)))
            return _copy(padded)[:rows] + jnp.pad(x, ((0, (-rows) % 640), (0, 0)))[:rows]
        self.assertEqual(_found(fn), [])

    def test_data_dropped_at_every_size(self):
        # The last column, the first row: dropped at the checked sizes too, so checked as it is paid.
        self.assertEqual(_found(lambda x: x[:, -1] + x[0, :1]), [])

    def test_the_output_rebuilt_around_a_whole_result(self):
        def fn(x):
            out = _copy(x)
            return jax.lax.dynamic_update_slice(jnp.zeros((2 * x.shape[0], x.shape[1])), out, (0, 0))[:x.shape[0]]
        self.assertEqual(_found(fn), [])

    def test_a_chunked_loop_whose_trips_follow_the_sizes(self):
        def fn(x):
            def step(acc, chunk):
                return acc + chunk[:1], None
            out, _ = jax.lax.scan(step, jnp.zeros((1, x.shape[1])), x.reshape(x.shape[0] // 256, 256, x.shape[1]))
            return out
        self.assertEqual(_found(fn), [])

    def test_a_loop_copying_every_chunk_into_a_buffer_of_the_operands_size(self):
        def fn(x):
            def trip(t, buf):
                chunk = jax.lax.dynamic_slice(x, (0, t * 128), (x.shape[0], 128))
                return jax.lax.dynamic_update_slice(buf, chunk, (0, t * 128))
            return _copy(jax.lax.fori_loop(0, x.shape[1] // 128, trip, jnp.zeros_like(x)))
        self.assertEqual(_found(fn), [])

    def test_a_fixed_number_of_power_iterations_over_the_whole_operand(self):
        # Every trip uses all of x; its output is smaller than x at every size, checked ones too.
        def fn(x):
            v = jax.lax.fori_loop(0, 4, lambda t, v: x.T @ (x @ v), jnp.ones((x.shape[1],)))
            return _copy(v[None, :])
        self.assertEqual(_found(fn), [])

    def test_a_lookup_of_every_row(self):
        self.assertEqual(_found(lambda x: jnp.take(x, jnp.arange(x.shape[0]) % x.shape[0], axis=0)), [])



class ReadCountsFollowingTables(unittest.TestCase):
    """read_scaling fits how many positions an output block reads to the sizes; where an operand's
    blocks are named through scalar-prefetched tables the count follows the tables' data instead
    (megablox_gmm's groups, a drawn partition: BN=whole, VISIT=groups was refused on some seeds),
    so the fit is not asked of it."""

    @staticmethod
    def _mapping(table_in_a_map: bool, tables: int = 1):
        def kernel(t, a, b):
            def body(*refs):
                refs[-1][...] = refs[-3][...] + refs[-2][...]
            # (a literal among the map's operands: t[i] + 0 * i, the block i * 1)
            a_map = (lambda i, t: (t[i] + 0 * i, 0)) if table_in_a_map else (lambda i, t: (i * 1, 0))
            spec = pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=tables, grid=(4,),
                in_specs=[pl.BlockSpec((8, 128), a_map), pl.BlockSpec((8, 128), lambda i, t: (i, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i, t: (i, 0)))
            return pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))(t, a, b)
        closed = jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((4,), jnp.int32), jax.ShapeDtypeStruct((32, 128), jnp.float32),
                                        jax.ShapeDtypeStruct((32, 128), jnp.float32))
        return [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"][0].params["grid_mapping"]

    def test_an_operand_named_through_a_table_follows_it(self):
        mapping = self._mapping(table_in_a_map=True)
        self.assertTrue(layout_cuts._follows_tables(mapping, 0))
        self.assertFalse(layout_cuts._follows_tables(mapping, 1))

    def test_without_a_table_in_its_map_an_operand_follows_the_sizes(self):
        self.assertFalse(layout_cuts._follows_tables(self._mapping(table_in_a_map=False), 0))


if __name__ == "__main__":
    unittest.main()
