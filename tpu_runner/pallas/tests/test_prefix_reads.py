"""Reads up to each output block's own position where checked, part of them at the full size
(kernelgym_pallas/prefix_reads.py): real programs traced at three size sets, the rule reached as the
judge reaches it (layout_cuts with decision_coverage's facts)."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from kernelgym_pallas import layout_cuts, prefix_reads, program_identity  # noqa: E402

SETS = ("small", "check", "full")
# Sequence lengths: 2 and 3 blocks of 128 where checked, 32 at the full size; 128 columns.
LENGTHS = {"small": 256, "check": 384, "full": 4096}
BLOCK = 128


def _found(fn) -> list[str]:
    shapes = {name: jax.ShapeDtypeStruct((LENGTHS[name], BLOCK), jnp.float32) for name in SETS}
    programs = {name: jax.make_jaxpr(fn)(shapes[name], shapes[name]) for name in SETS}
    facts = program_identity.compare(programs, {name: {"S": LENGTHS[name]} for name in SETS}).facts
    return [p for p in layout_cuts.problems(programs, SETS, facts) if "reads of its operand" in p]


def _accumulate(q_ref, k_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = q_ref[...]
    o_ref[...] += k_ref[...]


def _blocks(key_block, steps):
    """A kernel whose output block i adds the key blocks `key_block(i, j)` for j < steps(n)."""
    def fn(q, k):
        n = q.shape[0] // BLOCK
        spec = pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, 0))
        return pl.pallas_call(_accumulate, grid=(n, steps(n)),
                              in_specs=[spec, pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (key_block(i, j, n), 0))],
                              out_specs=spec, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), interpret=True)(q, k)
    return fn


class PrefixReads(unittest.TestCase):
    def test_a_window_that_is_the_whole_prefix_only_where_checked(self):
        # Key blocks i-2..i: 0..i for the 2 and 3 blocks where checked, 3 of 32 at the full size.
        found = _found(_blocks(lambda i, j, n: jnp.maximum(i - 2 + j, 0), lambda n: 3))
        self.assertEqual(len(found), 1, found)
        self.assertIn("prefix", found[0])
        self.assertIn("the output block at 384 reads 0 of the 512 positions", found[0])

    def test_an_honest_causal_walk_is_not_named(self):
        # Key blocks 0..i at every size (a hidden pair names block i again: nothing fetched).
        self.assertEqual(_found(_blocks(lambda i, j, n: jnp.minimum(i, j), lambda n: n)), [])

    def test_a_window_the_checked_sizes_exercise_is_not_named(self):
        # Key blocks i-1..i: part of the prefix at 3 blocks already (an honest sliding window).
        self.assertEqual(_found(_blocks(lambda i, j, n: jnp.maximum(i - 1 + j, 0), lambda n: 2)), [])

    def test_blocks_of_their_own_rows_are_not_a_prefix(self):
        # Each output block reads its own rows (a GEMM's A): no prefix where there are two blocks.
        self.assertEqual(_found(_blocks(lambda i, j, n: i, lambda n: 1)), [])

    def test_a_window_after_the_output_block(self):
        # Key blocks i..i+2 (anti-causal): the whole suffix where checked, 3 of 32 at the full size.
        found = _found(_blocks(lambda i, j, n: jnp.minimum(i + j, n - 1), lambda n: 3))
        self.assertEqual(len(found), 1, found)
        self.assertIn("suffix", found[0])

    def test_a_window_through_an_operand_padded_in_front(self):
        # Two zero blocks in front, block i + j of the padded keys: the data region is what counts.
        def fn(q, k):
            padded = jnp.pad(k, ((2 * BLOCK, 0), (0, 0)))
            spec = pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, 0))
            return pl.pallas_call(_accumulate, grid=(q.shape[0] // BLOCK, 3),
                                  in_specs=[spec, pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i + j, 0))],
                                  out_specs=spec, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                                  interpret=True)(q, padded)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("prefix", found[0])

    def test_a_window_the_kernel_copies_itself(self):
        # Keys left in HBM, a loop of 3 copies at max(i - 2 + c, 0): the copies' windows per output block.
        def fn(q, k):
            def body(q_ref, k_hbm, o_ref, buf, sem):
                i = pl.program_id(0)
                o_ref[...] = q_ref[...]

                def step(c, carry):
                    copy = pltpu.make_async_copy(k_hbm.at[pl.ds(jnp.maximum(i - 2 + c, 0) * BLOCK, BLOCK)], buf, sem)
                    copy.start()
                    copy.wait()
                    o_ref[...] += buf[...]
                    return carry
                jax.lax.fori_loop(0, 3, step, 0)
            spec = pl.BlockSpec((BLOCK, BLOCK), lambda i: (i, 0))
            return pl.pallas_call(body, grid=(q.shape[0] // BLOCK,),
                                  in_specs=[spec, pl.BlockSpec(memory_space=pl.ANY)], out_specs=spec,
                                  out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                                  scratch_shapes=[pltpu.VMEM((BLOCK, BLOCK), jnp.float32), pltpu.SemaphoreType.DMA],
                                  interpret=True)(q, k)
        found = _found(fn)
        self.assertEqual(len(found), 1, found)
        self.assertIn("prefix", found[0])


HEADS = {"small": 2, "check": 3, "full": 8}


def _found_with_heads(fn) -> list[str]:
    """Programs of q [H, S, 128] and k [H, S, 128]; the sizes by name reach the rule."""
    shapes = {name: jax.ShapeDtypeStruct((HEADS[name], LENGTHS[name], BLOCK), jnp.float32) for name in SETS}
    programs = {name: jax.make_jaxpr(fn)(shapes[name], shapes[name]) for name in SETS}
    sizes = {name: {"H": HEADS[name], "S": LENGTHS[name]} for name in SETS}
    facts = program_identity.compare(programs, sizes).facts
    return [p for p in layout_cuts.problems(programs, SETS, facts, sizes) if "reads of its operand" in p]


def _flat_window(window: int | None, flatten_output: bool):
    """Keys flattened to [H*S, 128] (and the output and queries too where `flatten_output`);
    output block i of head h adds key blocks max(i - window + 1 + j, 0) of its head (None: the
    causal walk, key blocks min(i, j) for j < S/128)."""
    def fn(q, k):
        heads, length, _ = q.shape
        n = length // BLOCK
        if window is None:
            return _flat_causal(q, k, n)
        keys = k.reshape(heads * length, BLOCK)
        if flatten_output:
            out = jax.ShapeDtypeStruct((heads * length, BLOCK), q.dtype)
            spec = pl.BlockSpec((BLOCK, BLOCK), lambda t, j: (t, 0))
            key = pl.BlockSpec((BLOCK, BLOCK), lambda t, j: (t // n * n + jnp.maximum(t % n - window + 1 + j, 0), 0))
            return pl.pallas_call(_accumulate, grid=(heads * n, window), in_specs=[spec, key], out_specs=spec,
                                  out_shape=out, interpret=True)(q.reshape(heads * length, BLOCK), keys)
        spec = pl.BlockSpec((None, BLOCK, BLOCK), lambda h, i, j: (h, i, 0))
        key = pl.BlockSpec((BLOCK, BLOCK), lambda h, i, j: (h * n + jnp.maximum(i - window + 1 + j, 0), 0))

        def body(q_ref, k_ref, o_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                o_ref[...] = q_ref[...]
            o_ref[...] += k_ref[...]
        return pl.pallas_call(body, grid=(heads, n, window), in_specs=[spec, key], out_specs=spec,
                              out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), interpret=True)(q, keys)
    return fn


def _flat_causal(q, k, n):
    heads, length, _ = q.shape
    spec = pl.BlockSpec((BLOCK, BLOCK), lambda t, j: (t, 0))
    key = pl.BlockSpec((BLOCK, BLOCK), lambda t, j: (t // n * n + jnp.minimum(t % n, j), 0))
    return pl.pallas_call(_accumulate, grid=(heads * n, n), in_specs=[spec, key], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct((heads * length, BLOCK), q.dtype),
                          interpret=True)(q.reshape(heads * length, BLOCK), k.reshape(heads * length, BLOCK))


class FlattenedReads(unittest.TestCase):
    def test_a_window_over_keys_flattened_with_the_heads(self):
        # keys [H*S, 128], the output [H, S, 128]: output dimension 1 within dimension 0.
        found = _found_with_heads(_flat_window(3, flatten_output=False))
        self.assertEqual(len(found), 1, found)
        self.assertIn("within dimensions 0", found[0])

    def test_a_window_with_the_output_flattened_too(self):
        # keys and output [H*S, 128]: rows of S (one of the task's sizes) within H*S.
        found = _found_with_heads(_flat_window(3, flatten_output=True))
        self.assertEqual(len(found), 1, found)
        self.assertIn("segments of S", found[0])

    def test_honest_walks_flattened_are_not_named(self):
        # Windows the checked sizes exercise (2 blocks where S has 3): no prefix shown where checked.
        self.assertEqual(_found_with_heads(_flat_window(2, flatten_output=False)), [])
        self.assertEqual(_found_with_heads(_flat_window(2, flatten_output=True)), [])
        self.assertEqual(_found_with_heads(_flat_window(None, flatten_output=True)), [])


class Rule(unittest.TestCase):
    """prefix_reads.problems on its own figures."""

    @staticmethod
    def _set(n: int, reads_of_block) -> tuple:
        blocks = np.arange(n // BLOCK)
        group = np.concatenate([[g] * len(reads_of_block(g)) for g in blocks]).astype(np.int64)
        first = np.concatenate([reads_of_block(g) for g in blocks]).astype(np.int64) * BLOCK
        return (prefix_reads.Reads(0, n, group, first, first + BLOCK),
                [prefix_reads.OutputBlocks((n,), (BLOCK,), blocks.reshape(1, -1) * BLOCK)])

    def _problems(self, lengths, reads_of_block):
        sets = [self._set(n, reads_of_block) for n in lengths]
        return prefix_reads.problems("operand", [s[0] for s in sets], [s[1] for s in sets])

    def test_a_window_is_named_at_the_full_size(self):
        window = lambda g: list(range(max(g - 2, 0), g + 1))  # noqa: E731
        self.assertEqual(len(self._problems((256, 384, 4096), window)), 1)

    def test_no_size_set_with_a_block_before_another_binds_nothing(self):
        # One output block at each checked size: its prefix is itself, nothing shown.
        window = lambda g: list(range(max(g - 2, 0), g + 1))  # noqa: E731
        self.assertEqual(self._problems((128, 128 * 1, 4096), window), [])

    def test_dimensions_whose_ratio_moves_are_not_paired(self):
        sets = [self._set(n, lambda g: [0]) for n in (256, 384, 4096)]
        reads = [prefix_reads.Reads(0, 2 * n if n != 384 else n, s[0].group, s[0].low, s[0].high)
                 for n, s in zip((256, 384, 4096), sets)]
        self.assertEqual(prefix_reads.problems("operand", reads, [s[1] for s in sets]), [])


if __name__ == "__main__":
    unittest.main()
