"""Integer operations as XLA defines them, where numpy's differ: the judge evaluates index and
grid arithmetic with numpy, and a value the chip computes otherwise is a branch or a block the
judge misreads (red team, round 14: `shift_right_logical(-1, 31)` is 1 on the chip and was -1 to
numpy's right shift, which hid a branch and an output map)."""
from __future__ import annotations

import numpy as np

SHIFTS = ("shift_left", "shift_right_arithmetic", "shift_right_logical")


def shift(name: str, x, y) -> np.ndarray:
    """A shift as XLA defines it: a logical right shift fills with zeros (numpy's right shift of a
    signed integer is arithmetic: `srl(-1, 31)` is 1 on the chip and was -1 to the judge, which
    hid a branch the chip takes: red team, round 14), and a shift by the width or more (or by a
    negative amount) gives 0, or the sign for an arithmetic right shift."""
    x, y = np.asarray(x), np.asarray(y)
    bits = x.dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    by = np.where(out_of_range, 0, y).astype(x.dtype)
    if name == "shift_left":
        result = np.left_shift(x, by)
        return np.where(out_of_range, np.zeros_like(result), result)
    if name == "shift_right_logical":
        unsigned = np.dtype(f"uint{bits}")
        result = np.right_shift(x.astype(unsigned), by.astype(unsigned)).astype(x.dtype)
        return np.where(out_of_range, np.zeros_like(result), result)
    result = np.right_shift(x, by)
    return np.where(out_of_range, np.where(x < 0, -1, 0).astype(x.dtype), result)
