"""How much of an operand one output block reads, fitted where checked (kernelgym_pallas/read_scaling.py)."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kernelgym_pallas import prefix_reads, read_scaling  # noqa: E402

SIZES = [{"H": 5, "S": 128}, {"H": 1, "S": 384}, {"H": 64, "S": 4096}]


def _reads(length: int, windows: list) -> prefix_reads.Reads:
    """`windows`: (output block id, start, end) each."""
    group, low, high = (np.asarray(x, np.int64) for x in zip(*windows))
    return prefix_reads.Reads(0, length, group, low, high)


def _window_of_three(heads: int, length: int) -> tuple:
    # Keys flattened to [H*S]: output block h reads its head's last 3 blocks of 128 (all of S where
    # S <= 384): (reads, output block ids).
    windows = [(h, h * length + max(length - 384, 0), (h + 1) * length) for h in range(heads)]
    return _reads(heads * length, windows), heads


class ReadScaling(unittest.TestCase):
    def test_a_window_that_is_all_of_each_heads_keys_only_where_checked(self):
        sets = [_window_of_three(s["H"], s["S"]) for s in SIZES]
        found = read_scaling.findings("operand", [r for r, _ in sets], [g for _, g in sets], SIZES)
        self.assertEqual(len(found), 1)
        self.assertIn("reads 384 positions at the full size", found[0].message)
        self.assertIn("to 4096 there", found[0].message)

    def test_every_key_of_a_head_at_every_size_is_not_named(self):
        sets = [(_reads(s["H"] * s["S"], [(h, h * s["S"], (h + 1) * s["S"]) for h in range(s["H"])]), s["H"])
                for s in SIZES]
        self.assertEqual(read_scaling.findings("operand", [r for r, _ in sets], [g for _, g in sets], SIZES), [])

    def test_a_window_straddling_two_chunks_is_no_scaling_law(self):
        # A halo: block c reads chunks c and c + 1 of 512 (one chunk where the data has one).
        def halo(length):
            chunks = max(length // 512, 1)
            return _reads(length, [(c, c * 512, min((c + 2) * 512, length)) for c in range(chunks)]), chunks
        sets = [halo(n) for n in (512, 1536, 16384)]
        sizes = [{"W": 32}, {"W": 64}, {"W": 128}]
        self.assertEqual(read_scaling.findings("operand", [r for r, _ in sets], [g for _, g in sets], sizes), [])

    def test_a_monomial_of_two_sizes(self):
        self.assertEqual(read_scaling.predictions([640, 384], SIZES[:2], SIZES[2]) & {64 * 4096}, {64 * 4096})


if __name__ == "__main__":
    unittest.main()
