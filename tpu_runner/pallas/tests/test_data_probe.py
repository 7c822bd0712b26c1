"""The data probe (kernelgym_pallas/data_probe.py): real Pallas kernels traced and run on the host's
CPU with two random fillings of their data; what it finds the same under both, and what it leaves
as data."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from kernelgym_pallas import data_probe  # noqa: E402


def _program(body, rows=32, cols=256):
    def kernel(x):
        block = pl.BlockSpec((8, cols), lambda i: (i, 0))
        return pl.pallas_call(body, grid=(rows // 8,), in_specs=[block], out_specs=block,
                              out_shape=jax.ShapeDtypeStruct((rows, cols), x.dtype))(x)
    return jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((rows, cols), jnp.float32))


def _int_view(x_ref):
    return jax.lax.bitcast_convert_type(x_ref[0:1, 0:1], jnp.int32)


def _named(program, names: dict) -> dict:
    """{label: position} of the values the body hands to `record` (the operand of each named mul)."""
    listed = data_probe.variables(program.jaxpr)
    return {label: listed.index(var) for label, var in names.items()}


class DataProbeTest(unittest.TestCase):
    def probe(self, values: dict):
        """values: label -> f(x_ref) giving an int32 (1, 1) value; each is multiplied into the output
        so it is live. Returns the labels the probe finds the same under both fillings."""
        labels = list(values)

        def body(x_ref, y_ref):
            total = jnp.zeros((1, 1), jnp.int32)
            for label in labels:
                total = total + values[label](x_ref) * 3
            y_ref[...] = x_ref[...] * total.astype(jnp.float32)

        program = _program(body)
        # The value of each label is the first operand of its `mul` by 3, in order.
        muls = [e for e in data_probe._pallas_calls(program.jaxpr).__next__().params["jaxpr"].eqns
                if e.primitive.name == "mul" and getattr(e.invars[1], "val", None) == 3]
        positions = _named(program, {label: muls[k].invars[0] for k, label in enumerate(labels)})
        same, failures = data_probe.invariant(program, set(positions.values()))
        self.assertEqual(failures, [])
        return {label for label, position in positions.items() if position in same}

    def test_identities_are_found_and_data_is_not(self):
        found = self.probe({
            "(x + 7) - x": lambda x: (_int_view(x) + 7) - _int_view(x),
            "(x | 1) & 1": lambda x: (_int_view(x) | 1) & 1,
            "x & 255 >> 8": lambda x: jax.lax.shift_right_logical(_int_view(x) & 255, 8),
            "x": lambda x: _int_view(x),
            "x & 255": lambda x: _int_view(x) & 255,
            "(x + 7) - y": lambda x: (_int_view(x) + 7) - jax.lax.bitcast_convert_type(x[1:2, 0:1], jnp.int32),
        })
        self.assertEqual(found, {"(x + 7) - x", "(x | 1) & 1", "x & 255 >> 8"})

    def test_data_at_one_grid_step_is_data_and_at_one_unrolled_trip_a_constant_at_the_others(self):
        # A grid position is a run-time value (the compiler folds only what is constant at every
        # step); an unrolled trip's number is a constant of its own code.
        def trips(x):
            return jax.lax.fori_loop(0, 2, lambda t, c: c + jnp.where(t == 0, _int_view(x), 5),
                                     jnp.zeros((1, 1), jnp.int32), unroll=True)
        found = self.probe({"first step": lambda x: jnp.where(pl.program_id(0) == 0, _int_view(x), 5),
                            "first trip": trips})
        self.assertEqual(found, set())  # the loop's result is data (trip 0 added data)

    def test_an_accumulator_just_initialized_is_data(self):
        # Round 9's false positive: at the first step a running max is loaded right after it is set
        # to -inf; the same at that step under every filling, data at the others.
        def body(x_ref, y_ref):
            @pl.when(pl.program_id(0) == 0)
            def _():
                y_ref[...] = jnp.full_like(y_ref, -jnp.inf)
            running = y_ref[...]
            y_ref[...] = jnp.maximum(running * 3.0, x_ref[...])

        program = _program(body)
        kernel = next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"]
        mul = [e for e in kernel.eqns if e.primitive.name == "mul" and getattr(e.invars[1], "val", None) == 3.0][0]
        position = data_probe.variables(program.jaxpr).index(mul.invars[0])
        self.assertEqual(data_probe.invariant(program, {position}), (set(), []))

    def test_a_decision_is_made_by_the_data_when_its_outcome_changes_with_the_data(self):
        # Whether the data changes a decision's outcome, not whether the value it decides on is
        # data: x * 1e-3 + 8192 is data (it differs under every filling) yet never below 4096.
        # At the first step a running max is just set to -inf (one way under every filling), at
        # the last it is the data's: made at run time.
        def body(x_ref, y_ref):
            x = x_ref[...]

            @pl.when(pl.program_id(0) == 0)
            def _():
                y_ref[...] = jnp.full_like(y_ref, -jnp.inf)
            steered = jnp.maximum(x * 1e-3 + 8192.0, 4096.0)
            decided = jnp.maximum(x + 1.0, 1.0)
            running = jnp.maximum(y_ref[...], x)
            y_ref[...] = steered + decided + running

        program = _program(body)
        kernel = next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"]
        listed = data_probe.variables(program.jaxpr)
        maxes = [listed.index(e.outvars[0]) for e in kernel.eqns if e.primitive.name == "max"]
        self.assertEqual(len(maxes), 3)
        self.assertEqual(data_probe.decided_by_data(program, set(maxes)), set(maxes[1:]))

    def test_a_kernels_work_is_priced_as_the_probe_runs_its_loops(self):
        # A scan of 32 trips is run for MAX_TRIPS of them; a while loop (its count unknown) up to
        # MAX_TRIPS: the bound on the full-size outcome probe prices both so, not a scan's whole
        # length (which refused an honest flash kernel's 32-trip key loop) nor a while's body once.
        def looped(trips, kind):
            def body(x_ref, y_ref):
                def step(j, acc):
                    return acc + jnp.exp(x_ref[...] * j.astype(jnp.float32))
                start = jnp.zeros_like(x_ref)
                if kind == "scan":
                    y_ref[...] = jax.lax.fori_loop(0, trips, step, start)
                else:  # a trip count read from the data: a while loop
                    n = x_ref[0, 0].astype(jnp.int32)
                    y_ref[...] = jax.lax.fori_loop(0, n, step, start)
            program = _program(body)
            return data_probe._probe_work(next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"])

        once, short, long = looped(1, "scan"), looped(8, "scan"), looped(32, "scan")
        self.assertGreater(short, 4 * once)
        self.assertAlmostEqual(long, short * data_probe.MAX_TRIPS / 8, delta=once)
        self.assertAlmostEqual(looped(0, "while"), long, delta=2 * once)

    def test_copies_between_memories_are_run_and_one_it_cannot_run_is_named(self):
        # An identity laundered through a DMA (the copy's destination minus its source) is seen:
        # copies and semaphores run by jax's own discharge rules. A copy that adds into its
        # destination has no such rule: skipped, the destination would keep what was stored
        # before (a zero), and `buf - x` would look like data; it is named instead (fail closed).
        from jax.experimental.pallas import tpu as pltpu

        def program(add: bool):
            def body(x_ref, y_ref, buf, sem):
                buf[...] = jnp.zeros_like(buf)
                copy = pltpu.make_async_copy(x_ref, buf, sem.at[0])
                copy.start(add=add)
                copy.wait()
                y_ref[...] = x_ref[...] + (buf[...] - x_ref[...]) * 3.0

            def kernel(x):
                block = pl.BlockSpec((8, 256), lambda i: (i, 0))
                return pl.pallas_call(body, grid=(4,), in_specs=[block], out_specs=block,
                                      out_shape=jax.ShapeDtypeStruct((32, 256), x.dtype),
                                      scratch_shapes=[pltpu.VMEM((8, 256), jnp.float32),
                                                      pltpu.SemaphoreType.DMA((1,))])(x)
            return jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((32, 256), jnp.float32))

        for add in (False, True):
            prog = program(add)
            kernel = next(data_probe._pallas_calls(prog.jaxpr)).params["jaxpr"]
            mul = [e for e in kernel.eqns if e.primitive.name == "mul"][0]
            position = data_probe.variables(prog.jaxpr).index(mul.invars[0])
            same, failures = data_probe.invariant(prog, {position})
            if add:
                self.assertEqual(len(failures), 1)
                self.assertIn("dma_start", failures[0])
            else:
                self.assertEqual((same, failures), ({position}, []))

    def test_a_rolled_loops_body_is_probed_at_two_trips(self):
        # A scratch accumulator zeroed before a rolled loop reads the same (zeros) under every filling
        # at the first trip and the data's sum at the second: data (round 11's honest K loop).
        from jax.experimental.pallas import tpu as pltpu

        def body(x_ref, y_ref, acc):
            acc[...] = jnp.zeros_like(acc)

            def trip(t, c):
                acc[...] = acc[...] * 3.0 + x_ref[...]
                return c
            jax.lax.fori_loop(0, 4, trip, 0)
            y_ref[...] = acc[...]

        def kernel(x):
            block = pl.BlockSpec((8, 256), lambda i: (i, 0))
            return pl.pallas_call(body, grid=(4,), in_specs=[block], out_specs=block,
                                  out_shape=jax.ShapeDtypeStruct((32, 256), x.dtype),
                                  scratch_shapes=[pltpu.VMEM((8, 256), jnp.float32)])(x)
        program = jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((32, 256), jnp.float32))
        loop = next(e for e in next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"].eqns
                    if e.primitive.name == "scan")
        mul = next(e for e in loop.params["jaxpr"].jaxpr.eqns if e.primitive.name == "mul")
        position = data_probe.variables(program.jaxpr).index(mul.invars[0])
        self.assertEqual(data_probe.invariant(program, {position}), (set(), []))

    def test_a_ref_stored_and_loaded_is_followed(self):
        def body(x_ref, y_ref):
            y_ref[...] = jnp.zeros_like(y_ref)
            y_ref[0:1, 0:1] = x_ref[0:1, 0:1] - x_ref[0:1, 0:1] + 2.0  # a constant, through a ref
            through = y_ref[0:1, 0:1]
            y_ref[...] = x_ref[...] * (through * 3.0)

        program = _program(body)
        kernel = next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"]
        mul = [e for e in kernel.eqns if e.primitive.name == "mul" and getattr(e.invars[1], "val", None) == 3.0][0]
        position = data_probe.variables(program.jaxpr).index(mul.invars[0])
        self.assertEqual(data_probe.invariant(program, {position}), ({position}, []))

    def test_loads_of_operand_blocks_are_evident_and_a_written_one_is_not(self):
        def body(x_ref, y_ref):
            a = x_ref[...].reshape(8, 256)  # a load of the input, moved: evident
            y_ref[...] = a
            b = y_ref[...]  # the output block, written by the kernel: not evident
            y_ref[...] = b * 2.0

        program = _program(body)
        kernel = next(data_probe._pallas_calls(program.jaxpr)).params["jaxpr"]
        listed = data_probe.variables(program.jaxpr)
        gets = [e for e in kernel.eqns if e.primitive.name == "get"]
        evident = data_probe.evident(program)
        self.assertIn(listed.index(gets[0].outvars[0]), evident)
        self.assertNotIn(listed.index(gets[1].outvars[0]), evident)

    def test_variables_are_listed_alike_at_every_size(self):
        def body(x_ref, y_ref):
            y_ref[...] = x_ref[...] * ((_int_view(x_ref) | 1) & 1).astype(jnp.float32)

        small, large = _program(body, 32, 256), _program(body, 64, 512)
        names = [[str(v.aval.dtype) for v in data_probe.variables(p.jaxpr)] for p in (small, large)]
        self.assertEqual(names[0], names[1])
        self.assertGreater(len(names[0]), 5)


if __name__ == "__main__":
    unittest.main()
