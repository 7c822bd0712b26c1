"""full_size_sample.py: the full-size pallas_call run in TPU interpret mode on the grid steps that
write a few sampled output blocks, against a trusted kernel's same blocks. A small 'full' size
(a 512 x 2048 x 256 matmul on a 4 x 2 x 8 grid) keeps each case to a few seconds; the attacks are
the red team's shapes: a clamp that never bites on a checked grid, a branch on the grid's length,
an output index map that leaves blocks unwritten."""

import pathlib
import sys
import unittest
from unittest import mock

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import full_size_sample as fss, task_spec  # noqa: E402

M, K, N = 512, 2048, 256
B = 128  # M and N blocks
BK = 256  # K blocks: 8 steps at this 'full' size; a checked grid would have 2 or 3


def _task():
    normal = {"kind": "normal", "mean": 0.0, "std": 1.0}
    full = task_spec.ShapeSet(
        sizes={"M": M, "K": K, "N": N},
        inputs=[task_spec.TensorSpec("A", np.dtype(np.float32), [M, K], normal),
                task_spec.TensorSpec("B", np.dtype(np.float32), [K, N], normal)],
        outputs=[task_spec.TensorSpec("C", np.dtype(np.float32), [M, N], atol=1e-4, rtol=1e-4)])
    return task_spec.PallasTask("test/matmul", "kernelgym", pathlib.Path("."), None, {"full": full})


def _matmul(a_map=lambda i, j, k: (i, k), b_map=lambda i, j, k: (k, j), out_map=lambda i, j, k: (i, j),
            accumulate_when=None, reset=True, k_steps=lambda kk: kk // BK):
    def body(a_ref, b_ref, c_ref, acc_ref):
        k = pl.program_id(2)
        first = k == 0 if reset else (pl.program_id(0) == 0) & (pl.program_id(1) == 0) & (k == 0)

        @pl.when(first)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        def step():
            acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], precision="highest")

        if accumulate_when is None:
            step()
        else:
            pl.when(accumulate_when())(step)

        @pl.when(k == pl.num_programs(2) - 1)
        def _():
            c_ref[...] = acc_ref[...]

    def kernel(a, b):
        m, kk = a.shape
        n = b.shape[1]
        return pl.pallas_call(
            body, grid=(m // B, n // B, k_steps(kk)),
            in_specs=[pl.BlockSpec((B, BK), a_map), pl.BlockSpec((BK, B), b_map)],
            out_specs=pl.BlockSpec((B, B), out_map),
            out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
            scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)])(a, b)
    return kernel


def _program(kernel):
    return jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((M, K), jnp.float32), jax.ShapeDtypeStruct((K, N), jnp.float32))


class FullSizeSampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.task = _task()
        cls.oracle_program = _program(_matmul())
        cls.oracle = fss.sample(cls.oracle_program, cls.task, seed=7, count=2)

    def check(self, kernel):
        return fss.check_program(_program(kernel), self.oracle_program, self.task, seed=7, oracle=self.oracle)

    def test_the_oracle_samples_the_last_block_and_drawn_ones_and_matches_numpy(self):
        samples, steps, lazy, _ = self.oracle
        self.assertIn((0, (M // B - 1, N // B - 1)), samples)
        self.assertEqual(len(samples), 3)  # the last and two drawn (this seed draws two others)
        self.assertEqual(steps, len(samples) * (K // BK))  # every k step of every sampled block, no other
        for (_, (bi, bj)), (flat, value) in samples.items():
            rows, cols = np.unravel_index(flat, (M, N))
            self.assertEqual((rows.min(), rows.max(), cols.min(), cols.max()), (bi * B, bi * B + B - 1, bj * B, bj * B + B - 1))
            a = lazy.take(0, [np.arange(bi * B, bi * B + B), np.arange(K)]).astype(np.float64)
            b = lazy.take(1, [np.arange(K), np.arange(bj * B, bj * B + B)]).astype(np.float64)
            np.testing.assert_allclose(value.reshape(B, B), a @ b, rtol=1e-4, atol=1e-3)

    def test_an_honest_kernel_with_other_blocks_agrees(self):
        # Another tiling covers the sampled elements with its own blocks: still compared element by element.
        def kernel(a, b):
            def body(a_ref, b_ref, c_ref):
                c_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision="highest")
            return pl.pallas_call(body, grid=(a.shape[0] // 256,),
                                  in_specs=[pl.BlockSpec((256, K), lambda i: (i, 0)),
                                            pl.BlockSpec((K, N), lambda i: (0, 0))],
                                  out_specs=pl.BlockSpec((256, N), lambda i: (i, 0)),
                                  out_shape=jax.ShapeDtypeStruct((a.shape[0], N), a.dtype))(a, b)
        verdict = self.check(kernel)
        self.assertEqual(verdict.status, "agree", verdict.reason)
        self.assertGreaterEqual(len(verdict.blocks), 2)

    def test_a_clamp_that_bites_only_at_the_full_size_disagrees(self):
        # min(k, 3) is k on a checked grid of 2 or 3 k steps; here k 4..7 re-read block 3.
        verdict = self.check(_matmul(a_map=lambda i, j, k: (i, jnp.minimum(k, 3)),
                                     b_map=lambda i, j, k: (jnp.minimum(k, 3), j)))
        self.assertEqual(verdict.status, "disagree", verdict.reason)
        self.assertIn("outside tolerance", verdict.reason)

    def test_a_read_past_the_input_only_at_the_full_size_crashes(self):
        # k + k // 4 is k on a checked grid of 2 or 3 steps; here step 7 names block 8 of 8.
        verdict = self.check(_matmul(a_map=lambda i, j, k: (i, k + k // 4), b_map=lambda i, j, k: (k + k // 4, j)))
        self.assertEqual(verdict.status, "crashed", verdict.reason)
        self.assertIn("outside its 8 blocks", verdict.reason)

    def test_a_negative_block_index_only_at_the_full_size_crashes(self):
        # k - k // 4 * 8 is k on a checked grid; here step 4 names block -4: a read before the
        # input, which the compact operands must not wrap around to its end.
        verdict = self.check(_matmul(a_map=lambda i, j, k: (i, k - k // 4 * 8), b_map=lambda i, j, k: (k - k // 4 * 8, j)))
        self.assertEqual(verdict.status, "crashed", verdict.reason)
        self.assertRegex(verdict.reason, r"block \(\d+, -4\)")

    def test_an_output_left_unwritten_only_at_the_full_size_disagrees(self):
        # No scratch: the NaN the interpreter fills an unwritten block with is the kernel's own answer.
        def kernel(a, b):
            def body(a_ref, b_ref, c_ref):
                @pl.when(pl.num_programs(0) <= 3)
                def _():
                    c_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision="highest")
            return pl.pallas_call(body, grid=(a.shape[0] // B,),
                                  in_specs=[pl.BlockSpec((B, K), lambda i: (i, 0)), pl.BlockSpec((K, N), lambda i: (0, 0))],
                                  out_specs=pl.BlockSpec((B, N), lambda i: (i, 0)),
                                  out_shape=jax.ShapeDtypeStruct((a.shape[0], N), a.dtype))(a, b)
        verdict = self.check(kernel)
        self.assertEqual(verdict.status, "disagree", verdict.reason)

    def test_work_skipped_when_the_grid_is_long_disagrees(self):
        # The body sees the full-size num_programs: a branch on it is taken as on the chip.
        verdict = self.check(_matmul(accumulate_when=lambda: pl.num_programs(2) <= 4))
        self.assertEqual(verdict.status, "disagree", verdict.reason)

    def test_calls_whose_value_is_their_bodys_are_followed(self):
        # A kernel under jax.custom_vjp, an input through jax.checkpoint, an output through an
        # optimization barrier (red team 24 switched the sample off with each): run as their bodies.
        def wrapped(kernel):
            @jax.custom_vjp
            def call(a, b):
                return kernel(a, b)
            call.defvjp(lambda a, b: (call(a, b), (a, b)), lambda res, g: (g @ res[1].T, res[0].T @ g))

            def program(a, b):
                a = jax.checkpoint(lambda x: x)(a)
                return jax.lax.optimization_barrier(call(a, b))
            return program
        self.assertEqual(self.check(wrapped(_matmul())).status, "agree")
        wrong = self.check(wrapped(_matmul(accumulate_when=lambda: pl.num_programs(2) <= 4)))
        self.assertEqual(wrong.status, "disagree", wrong.reason)

    def test_an_output_block_no_step_writes_disagrees(self):
        # Column blocks past the first are never named: the last block (always sampled) is never written.
        verdict = self.check(_matmul(out_map=lambda i, j, k: (i, jnp.minimum(j, 0))))
        self.assertEqual(verdict.status, "disagree", verdict.reason)
        self.assertIn("written by no grid step", verdict.reason)

    def test_an_output_block_written_in_two_runs_fails(self):
        # Row blocks past the second all land on block 1, between steps of other column blocks:
        # interpret mode refuses such a revisit, and the full-size grid is the one that does it.
        verdict = self.check(_matmul(out_map=lambda i, j, k: (jnp.minimum(i, 1), j)))
        self.assertEqual(verdict.status, "crashed", verdict.reason)
        self.assertIn("revisited output block", verdict.reason)

    def test_outputs_computed_elementwise_after_the_kernels_are_compared_through_their_ops(self):
        # The oracle's epilogue outside its kernel keeps positions (sampled); the candidate's
        # transposes its output back after computing it transposed: both compared as programs.
        oracle = _program(lambda a, b: 1.0 - 2.0 * _matmul()(a, b))
        transposed = _program(lambda a, b: (1.0 - 2.0 * _matmul()(b.T, a.T)).T)
        self.assertEqual(fss.check_program(transposed, oracle, self.task, seed=7).status, "agree")
        wrong = _program(lambda a, b: (1.0 + 2.0 * _matmul()(b.T, a.T)).T)
        self.assertEqual(fss.check_program(wrong, oracle, self.task, seed=7).status, "disagree")

    def test_a_kernel_whose_results_are_dropped_does_not_make_the_program_unsampleable(self):
        def with_a_dead_kernel(a, b):
            _matmul()(a[:, :BK] * 3.0, b[:BK])  # a second pallas_call, its result never used
            return _matmul(accumulate_when=lambda: pl.num_programs(2) <= 4)(a, b)
        self.assertEqual(self.check(with_a_dead_kernel).status, "disagree")

    def test_operands_concatenated_from_inputs_are_read_position_by_position(self):
        # A's blocks read from the second copy of A in [A, A] (red team 23's gap blocks): the same
        # numbers, so it agrees; from [A, -A] it disagrees.
        def reading_the_second_copy(second):
            def kernel(a, b):
                nk = a.shape[1] // BK
                return _matmul(a_map=lambda i, j, k: (i, k + nk), k_steps=lambda kk: kk // 2 // BK)(
                    jnp.concatenate([a, second(a)], axis=1), b)
            return kernel
        self.assertEqual(self.check(reading_the_second_copy(lambda a: a)).status, "agree")
        self.assertEqual(self.check(reading_the_second_copy(lambda a: -a)).status, "disagree")
        # elementwise ops of several arrays: a product with ones, a select on an iota mask
        self.assertEqual(self.check(reading_the_second_copy(lambda a: a * jnp.ones_like(a))).status, "agree")
        columns = lambda a: jax.lax.broadcasted_iota(jnp.int32, a.shape, 1)  # noqa: E731
        self.assertEqual(self.check(reading_the_second_copy(lambda a: jnp.where(columns(a) >= 0, a, 0.0))).status, "agree")
        self.assertEqual(self.check(reading_the_second_copy(lambda a: jnp.where(columns(a) < 5, a, 0.0))).status,
                         "disagree")

    def test_an_oracle_whose_output_is_a_slice_of_its_kernels_samples_boxes_of_the_output(self):
        # The starter computes on B padded by a column block and slices the result back (as the
        # convolutions' starters do): the sample's positions are taken in the program's output.
        oracle = _program(lambda a, b: _matmul()(a, jnp.pad(b, ((0, 0), (0, B))))[:, :N])
        honest = fss.check_program(_program(_matmul()), oracle, self.task, seed=7, count=1)
        self.assertEqual(honest.status, "agree", honest.reason)
        wrong = fss.check_program(_program(_matmul(accumulate_when=lambda: pl.num_programs(2) <= 4)), oracle,
                                  self.task, seed=7, count=1)
        self.assertEqual(wrong.status, "disagree", wrong.reason)

    def _with_extra(self, kernel_of, extra, spec, aliases=None, reads_it=False):
        # The matmul with one more operand the body never uses (red team 23's switches: a zeros
        # array in HBM, an element-offset block, an output aliased to it), or reads and adds 0 times.
        def kernel(a, b):
            def body(a_ref, b_ref, x_ref, c_ref, acc_ref):
                k = pl.program_id(2)

                @pl.when(k == 0)
                def _():
                    acc_ref[...] = jnp.zeros_like(acc_ref)
                    if reads_it:
                        acc_ref[0:1, 0:1] += x_ref[0:1, 0:1] * 0.0

                if kernel_of == "wrong":
                    pl.when(pl.num_programs(2) <= 4)(lambda: acc_ref.__setitem__(
                        ..., acc_ref[...] + jnp.dot(a_ref[...], b_ref[...], precision="highest")))
                else:
                    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], precision="highest")

                @pl.when(k == pl.num_programs(2) - 1)
                def _():
                    c_ref[...] = acc_ref[...]
            m, kk = a.shape
            n = b.shape[1]
            return pl.pallas_call(
                body, grid=(m // B, n // B, kk // BK),
                in_specs=[pl.BlockSpec((B, BK), lambda i, j, k: (i, k)), pl.BlockSpec((BK, B), lambda i, j, k: (k, j)), spec],
                out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
                out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), input_output_aliases=aliases or {},
                scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)])(a, b, extra(m, n) if callable(extra) else a)
        return kernel

    def test_an_unused_operand_in_hbm_is_passed_whole(self):
        hbm = pl.BlockSpec(memory_space=pl.ANY)
        zeros = lambda m, n: jnp.zeros((8, 128), jnp.float32)  # noqa: E731
        self.assertEqual(self.check(self._with_extra("honest", zeros, hbm)).status, "agree")
        self.assertEqual(self.check(self._with_extra("wrong", zeros, hbm)).status, "disagree")

    def test_an_element_offset_operand_is_passed_whole(self):
        spec = pl.BlockSpec((pl.Element(8), 128), lambda i, j, k: (0, 0))
        zeros = lambda m, n: jnp.zeros((8, 128), jnp.float32)  # noqa: E731
        self.assertEqual(self.check(self._with_extra("wrong", zeros, spec)).status, "disagree")

    def test_an_output_aliased_to_an_input_runs_unaliased(self):
        spec = pl.BlockSpec((B, B), lambda i, j, k: (i, j))
        zeros = lambda m, n: jnp.zeros((m, n), jnp.float32)  # noqa: E731
        self.assertEqual(self.check(self._with_extra("honest", zeros, spec, {2: 0})).status, "agree")
        self.assertEqual(self.check(self._with_extra("wrong", zeros, spec, {2: 0})).status, "disagree")

    def test_a_large_operand_in_hbm_the_kernel_never_reads_is_not_sampled_by_its_form(self):
        # Red team 24's first switch: an unused operand too large to pass whole. Not a bound on
        # the sample's cost (costly, left to the proof) but the candidate's choice (not trusted).
        hbm = pl.BlockSpec(memory_space=pl.ANY)
        large = lambda m, n: jnp.zeros((4096, 2048), jnp.float32)  # noqa: E731  (32 MiB)
        with mock.patch.object(fss, "WHOLE_OPERAND_BYTES", 16 << 20):
            verdict = self.check(self._with_extra("honest", large, hbm))
        self.assertEqual((verdict.status, verdict.side, verdict.costly), ("not_sampled", "candidate", False))
        self.assertIn("the kernel never reads it", verdict.reason)

    def test_blocks_of_an_operand_the_kernel_never_reads_past_the_bound_are_a_form(self):
        # Red team 26: an unread blocked copy of an input pushed the sampled blocks past the
        # memory bound, a size left to the proof; unread, it is the candidate's choice.
        spec = pl.BlockSpec((B, BK), lambda i, j, k: (i, k))
        copy = lambda m, n: jnp.zeros((M, K), jnp.float32)  # noqa: E731
        with mock.patch.object(fss, "MAX_COMPACT_BYTES", 1 << 20), mock.patch.object(fss, "UNREAD_OPERAND_BYTES", 0):
            verdict = self.check(self._with_extra("honest", copy, spec))
        self.assertEqual((verdict.status, verdict.side, verdict.costly), ("not_sampled", "candidate", False))
        self.assertIn("is never read by the kernel", verdict.reason)
        with mock.patch.object(fss, "MAX_COMPACT_BYTES", 1 << 20), mock.patch.object(fss, "UNREAD_OPERAND_BYTES", 0):
            verdict = self.check(self._with_extra("honest", copy, spec, reads_it=True))
        self.assertEqual((verdict.status, verdict.costly), ("not_sampled", True))  # read: a size

    def test_blocks_held_past_the_bound_only_together_are_run_one_at_a_time(self):
        # The last block and a drawn one in other rows and columns: A's and B's kept blocks are
        # their product across both (4 row-column pairs' worth); one at a time each fits.
        one_block = 2 * (B * K * 4)  # A's row panel and B's column panel of one output block
        with mock.patch.object(fss, "MAX_COMPACT_BYTES", one_block + B * B * 4 + 1):
            self.assertEqual(self.check(_matmul()).status, "agree")
            verdict = self.check(_matmul(accumulate_when=lambda: pl.num_programs(2) <= 4))
        self.assertEqual(verdict.status, "disagree", verdict.reason)

    def test_a_large_operand_computed_outside_the_kernel_and_read_whole_is_a_form(self):
        element = pl.BlockSpec((pl.Element(8), 128), lambda i, j, k: (0, 0))
        large = lambda m, n: jnp.zeros((4096, 2048), jnp.float32)  # noqa: E731  (32 MiB)
        with mock.patch.object(fss, "WHOLE_OPERAND_BYTES", 16 << 20):
            verdict = self.check(self._with_extra("honest", large, element, reads_it=True))
        self.assertEqual((verdict.status, verdict.side, verdict.costly), ("not_sampled", "candidate", False))
        self.assertIn("computed outside the kernel", verdict.reason)

    def test_an_input_read_whole_is_passed_whole_and_a_larger_one_is_past_the_bounds(self):
        # A (4 MiB) passed again with element-offset dimensions (not blocked, so whole, as an operand
        # in HBM is) and read: tile by tile (the size of inputs drawn in one piece lowered), the same
        # values as its blocks.
        hbm = pl.BlockSpec((pl.Element(8), 128), lambda i, j, k: (0, 0))
        with mock.patch.object(fss, "WHOLE_INPUT_BYTES", 1 << 20):
            oracle = fss.sample(self.oracle_program, self.task, seed=7, count=2)
            check = lambda kernel: fss.check_program(_program(kernel), self.oracle_program, self.task, seed=7,  # noqa: E731
                                                     oracle=oracle)
            self.assertEqual(check(self._with_extra("honest", "a", hbm, reads_it=True)).status, "agree")
            self.assertEqual(check(self._with_extra("wrong", "a", hbm, reads_it=True)).status, "disagree")
            with mock.patch.object(fss, "WHOLE_OPERAND_BYTES", 1 << 20):
                verdict = check(self._with_extra("honest", "a", hbm, reads_it=True))
        self.assertEqual((verdict.status, verdict.side, verdict.costly), ("not_sampled", "candidate", True))
        self.assertIn("passed whole: more than 1 MiB", verdict.reason)

    def test_an_output_written_by_the_kernels_own_copies_is_a_form_it_does_not_run(self):
        # Red team 25's switch: the output block computed in VMEM and copied to an output in HBM
        # by the kernel (free in the estimate). Which steps write a block is not in any index map.
        def kernel(a, b):
            def body(a_ref, b_ref, c_hbm, acc_ref, sem):
                i, j = pl.program_id(0), pl.program_id(1)
                acc_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision="highest")
                copy = pltpu.make_async_copy(acc_ref, c_hbm.at[pl.ds(i * B, B), pl.ds(j * B, B)], sem)
                copy.start()
                copy.wait()
            return pl.pallas_call(
                body, grid=(M // B, N // B),
                in_specs=[pl.BlockSpec((B, K), lambda i, j: (i, 0)), pl.BlockSpec((K, B), lambda i, j: (0, j))],
                out_specs=pl.BlockSpec(memory_space=pl.ANY), out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
                scratch_shapes=[pltpu.VMEM((B, B), jnp.float32), pltpu.SemaphoreType.DMA])(a, b)
        verdict = self.check(kernel)
        self.assertEqual((verdict.status, verdict.side, verdict.costly), ("not_sampled", "candidate", False))
        self.assertIn("written by the kernel's own copies", verdict.reason)

    def test_a_constant_program_output_is_not_sampled_and_says_why(self):
        verdict = self.check(lambda a, b: (_matmul()(a, b), 3.0))
        self.assertEqual((verdict.status, verdict.side), ("not_sampled", "candidate"))
        self.assertIn("computed outside the pallas_calls", verdict.reason)

    def _prefetched(self, table):
        # Row blocks of A named through a scalar-prefetched table (computed in the program from the
        # sizes: the kernel's own choice, which its index maps read at run time).
        def kernel(a, b):
            def body(t_ref, a_ref, b_ref, c_ref):
                c_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision="highest")
            spec = pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(a.shape[0] // B,),
                in_specs=[pl.BlockSpec((B, K), lambda i, t: (t[i], 0)), pl.BlockSpec((K, N), lambda i, t: (0, 0))],
                out_specs=pl.BlockSpec((B, N), lambda i, t: (i, 0)))
            return pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((a.shape[0], N), a.dtype))(
                table(a.shape[0] // B), a, b)
        return kernel

    def test_blocks_named_through_a_prefetched_table_are_sampled(self):
        verdict = self.check(self._prefetched(lambda n: jnp.arange(n, dtype=jnp.int32)))
        self.assertEqual(verdict.status, "agree", verdict.reason)

    def test_a_prefetched_table_wrong_only_at_the_full_size_disagrees(self):
        # Row block i for the first 3 blocks (every block of a checked grid), block 0 past them.
        verdict = self.check(self._prefetched(lambda n: jnp.where(jnp.arange(n) < 3, jnp.arange(n), 0).astype(jnp.int32)))
        self.assertEqual(verdict.status, "disagree", verdict.reason)

    def test_state_carried_across_output_blocks_is_not_sampled(self):
        # An SMEM counter set at the grid's first step and counted at every step: work stops after
        # 40 steps, past every checked grid (24 steps at most) and before this grid's 64. The sample
        # skips the steps between its blocks, so the count it sees is not the chip's: it must not
        # agree, and it cannot disagree soundly either; the integer state is poisoned both ways.
        def body(a_ref, b_ref, c_ref, acc_ref, count_ref):
            first = (pl.program_id(0) == 0) & (pl.program_id(1) == 0) & (pl.program_id(2) == 0)

            @pl.when(first)
            def _():
                count_ref[0] = 0

            @pl.when(pl.program_id(2) == 0)
            def _():
                acc_ref[...] = jnp.zeros_like(acc_ref)

            @pl.when(count_ref[0] < 40)
            def _():
                acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], precision="highest")
            count_ref[0] = count_ref[0] + 1

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                c_ref[...] = acc_ref[...]

        def kernel(a, b):
            return pl.pallas_call(
                body, grid=(a.shape[0] // B, b.shape[1] // B, a.shape[1] // BK),
                in_specs=[pl.BlockSpec((B, BK), lambda i, j, k: (i, k)), pl.BlockSpec((BK, B), lambda i, j, k: (k, j))],
                out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
                out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype),
                scratch_shapes=[pltpu.VMEM((B, B), jnp.float32), pltpu.SMEM((1,), jnp.int32)])(a, b)
        verdict = self.check(kernel)
        self.assertEqual((verdict.status, verdict.side), ("not_sampled", "candidate"), verdict.reason)
        self.assertIn("scratch state carried", verdict.reason)

    def test_an_accumulator_never_reset_reads_poison_and_is_not_sampled(self):
        # Accumulates across output blocks (wrongly here; a scan would rightly): the steps between
        # sampled blocks are not run, so the sample can say nothing either way (without the poison
        # this one disagreed, and an honest scan would have too); its scratch is NaN at each run's
        # first step, not the previous sampled block's leftovers.
        verdict = self.check(_matmul(reset=False))
        self.assertEqual((verdict.status, verdict.side), ("not_sampled", "candidate"), verdict.reason)
        self.assertIn("state carried", verdict.reason)


class SeveralOutputsTest(unittest.TestCase):
    """A task of two outputs (C = A @ B twice over): the starter computes both in one kernel, a
    candidate may compute each in its own (red team 26's honest rotary embedding of two calls was
    refused as a form); each output's program is then sampled on its own."""

    @classmethod
    def setUpClass(cls):
        task = _task()
        full = task.size_sets["full"]
        two = task_spec.ShapeSet(sizes=full.sizes, inputs=full.inputs, outputs=[full.outputs[0], full.outputs[0]])
        cls.task = task_spec.PallasTask("test/two", "kernelgym", pathlib.Path("."), None, {"full": two})

    def _program(self, kernel):
        return jax.make_jaxpr(kernel)(jax.ShapeDtypeStruct((M, K), jnp.float32), jax.ShapeDtypeStruct((K, N), jnp.float32))

    def test_outputs_of_separate_kernels_are_sampled_one_at_a_time(self):
        def one_call(a, b):
            def body(a_ref, b_ref, c_ref, d_ref):
                c_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision="highest")
                d_ref[...] = c_ref[...]
            spec_out = pl.BlockSpec((B, B), lambda i, j: (i, j))
            shape = jax.ShapeDtypeStruct((M, N), a.dtype)
            return pl.pallas_call(body, grid=(M // B, N // B),
                                  in_specs=[pl.BlockSpec((B, K), lambda i, j: (i, 0)),
                                            pl.BlockSpec((K, B), lambda i, j: (0, j))],
                                  out_specs=[spec_out, spec_out], out_shape=[shape, shape])(a, b)
        oracle = self._program(one_call)
        honest = self._program(lambda a, b: (_matmul()(a, b), _matmul()(a, b)))
        wrong = self._program(lambda a, b: (_matmul()(a, b), _matmul(accumulate_when=lambda: pl.num_programs(2) <= 4)(a, b)))
        self.assertEqual(fss.check_program(honest, oracle, self.task, seed=7, count=1).status, "agree")
        verdict = fss.check_program(wrong, oracle, self.task, seed=7, count=1)
        self.assertEqual(verdict.status, "disagree", verdict.reason)


class LazyInputsTest(unittest.TestCase):
    def test_an_element_has_one_value_whoever_asks_and_follows_the_initializer(self):
        spec = task_spec.TensorSpec("X", np.dtype(np.float32), [300, 5000], {"kind": "normal", "mean": 2.0, "std": 0.5})
        lazy = fss.LazyInputs([spec], seed=3)
        self.assertFalse(lazy.whole_size(0))
        wide = lazy.take(0, [np.arange(0, 300), np.arange(4000, 5000)])
        narrow = fss.LazyInputs([spec], seed=3).take(0, [np.array([7, 299]), np.array([4999, 4000, 4513])])
        np.testing.assert_array_equal(narrow, wide[np.ix_([7, 299], [999, 0, 513])])
        self.assertAlmostEqual(float(wide.mean()), 2.0, delta=0.01)
        self.assertAlmostEqual(float(wide.std()), 0.5, delta=0.01)
        # Viewed through a reshape (a kernel's operand x.reshape(-1, 100)): the same elements.
        viewed = fss.LazyInputs([spec], seed=3).take(0, [np.array([10, 2999]), np.arange(0, 100)], (15000, 100))
        np.testing.assert_array_equal(viewed[0], lazy.take(0, [np.array([0]), np.arange(1000, 1100)])[0])
        np.testing.assert_array_equal(viewed[1], lazy.take(0, [np.array([59]), np.arange(4900, 5000)])[0])
        other_seed = fss.LazyInputs([spec], seed=4).take(0, [np.arange(0, 300), np.arange(4000, 5000)])
        self.assertFalse(np.array_equal(other_seed, wide))
        # The whole input (an operand in HBM), tile by tile: the same elements as the blocks read.
        whole = fss.LazyInputs([spec], seed=3).take(0, [np.arange(300), np.arange(5000)])
        np.testing.assert_array_equal(whole[:, 4000:5000], wide)
        np.testing.assert_array_equal(fss.LazyInputs([spec], seed=3).take(0, [np.arange(1500), np.arange(1000)],
                                                                          (1500, 1000)), whole.reshape(1500, 1000))


class ChainTest(unittest.TestCase):
    """An operand computed from a program input by position ops (a transpose, a flattening, a
    slice, a reversal, a padding, a broadcast, a conversion) is read element by element from the input's
    lazily drawn tiles: the values must be the ops' own."""

    def _check_chain(self, ops, positions, separable, padded=-3.5):
        spec = task_spec.TensorSpec("X", np.dtype(np.float32), [6, 40, 9000], {"kind": "normal", "mean": 0.0, "std": 1.0})
        lazy = fss.LazyInputs([spec], seed=5)
        self.assertFalse(lazy.whole_size(0))
        whole = lazy.take(0, [np.arange(6), np.arange(40), np.arange(9000)])
        closed = jax.make_jaxpr(ops)(jax.ShapeDtypeStruct(spec.shape, jnp.float32))
        sources = {e.outvars[0]: e for e in closed.jaxpr.eqns}
        chain, var = [], closed.jaxpr.outvars[0]
        while var in sources:
            self.assertIsNotNone(fss._chain_link(sources[var]), sources[var])
            chain.append(sources[var])
            var = fss._chain_link(sources[var])
        chain = fss.Chain(list(reversed(chain)))
        self.assertEqual(chain.back_by_dimension(positions) is not None, separable)
        got = lazy.take_through(0, positions, chain)
        expected = np.asarray(ops(whole))[np.ix_(*positions)]
        self.assertTrue(np.any(expected == padded) and np.any(expected != padded))  # padding and data both read
        self.assertEqual(got.dtype, expected.dtype)
        np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))

    def test_a_chain_of_position_ops_reads_the_elements_the_ops_would(self):
        def ops(x):  # a flattening among them: positions mapped back one by one
            y = jnp.transpose(x, (1, 2, 0)).reshape(40 * 9000, 6)[3:20003:2, ::-1][:, 1:5]
            y = jax.lax.pad(y, jnp.float32(-3.5), ((2, 5, 0), (-1, 0, 1)))
            return jnp.broadcast_to(y.astype(jnp.bfloat16)[None], (3, 10007, 6))
        self._check_chain(ops, [np.array([2]), np.array([0, 1, 57, 4321, 10001, 10006]), np.arange(6)], False)

    def test_a_chain_that_moves_each_dimension_alone_reads_a_box(self):
        def ops(x):  # transposes, slices, reversals, pads, broadcasts, unit reshapes, value ops
            y = jnp.transpose(x, (2, 0, 1))[10:8010:3, ::-1, 5:][:, None]
            y = jax.lax.pad(y, jnp.float32(-3.5), ((1, 0, 0), (0, 0, 0), (0, 2, 0), (-2, 0, 1)))
            return jnp.broadcast_to(1.0 - 2.0 * y.astype(jnp.bfloat16)[:, 0, None], (2668, 2, 8, 67))
        self._check_chain(ops, [np.array([0, 1, 1999, 2667]), np.array([1]), np.arange(8), np.arange(0, 67, 3)], True,
                          padded=8.0)  # 1 - 2 * -3.5

    def test_jnps_jitted_position_ops_are_seen_through(self):
        # jnp.pad, jnp.flip and jnp.roll are jits around their ops; the pad's value is a literal
        # converted inside the jit. The plan sees the input through them, not a computed operand.
        def program(x):
            y = jnp.flip(jnp.pad(x, ((0, 0), (256, 0))), 1)
            return pl.pallas_call(lambda a, o: o.__setitem__(..., a[...]), grid=(y.shape[0] // 8,),
                                  in_specs=[pl.BlockSpec((8, y.shape[1]), lambda i: (i, 0))],
                                  out_specs=pl.BlockSpec((8, y.shape[1]), lambda i: (i, 0)),
                                  out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))(y)
        planned = fss.plan(jax.make_jaxpr(program)(jax.ShapeDtypeStruct((64, 1024), jnp.float32)))
        source = planned.operand_sources[0]
        self.assertEqual(source[:2], ("input", 0))
        self.assertEqual([e.primitive.name for e in source[2].ops], ["pad", "rev"])


if __name__ == "__main__":
    unittest.main()
