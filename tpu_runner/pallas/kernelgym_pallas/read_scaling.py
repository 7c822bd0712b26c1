"""How much of an operand one output block reads, as the sizes grow: fitted where checked.

prefix_reads.py compares each output block's reads with its own position, which needs a way to
line the output's blocks up with the operand's positions; a layout that defeats the placements
defeats it (red team round 21: keys flattened to [B*H*S, D] under output blocks of all H heads,
4.4x-36x trusted; a GEMM's A re-laid tile by tile as [M*K/256, 256], each output block reading 3
of its K/256 tiles by a rotation, 1.78x for 0.229x). What does not depend on positions is how
many: per kernel operand dimension, the most distinct positions any output block's grid steps
read (layout_cuts' Reads, one value passed as several operands counted together). Where checked,
that count follows the task's sizes by a monomial (S for a causal walk's last query block, H*S
for all heads' keys flattened, K/256 tiles of A) where the block reads one whole segment of the
data aligned to its length (not a window straddling two: a convolution's halo); one is fitted through the checked size sets
(a product of at most two sizes and one constant that explain every checked count) and
evaluated at the full size. An output block that reads fewer positions at the full size than
every fitted monomial gives is reading less than the checked sizes showed it needs: the estimate
is not trusted. An honest window reads a constant count where checked when the checked sizes
exercise it; where they hold it whole (sink_sparse_attention's visible blocks: 1 and 3 blocks,
then 3 of 32), the reference is asked as for prefixes (reference_needs.py, through layout_cuts).
"""
from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import numpy as np

from . import prefix_reads

# The most sizes a count's monomial multiplies (a count of positions along one dimension: S, H*S,
# K/256 tiles; a square for a triangle), with repeats.
_DEGREE = 2


@dataclasses.dataclass
class Finding:
    """An operand dimension whose most-read output block reads fewer positions at the full size
    than the checked sizes' monomial gives. `shown`: per checked size set (by index), the output
    block that read the most there, (its id, the positions it read [a, b) in the data where they
    are one interval, else None)."""
    message: str
    shown: list


def most_read(reads, groups: int) -> tuple:
    """(the most distinct data positions one output block reads, its id, its interval [a, b) in the
    data where every block that reads that many reads one interval aligned to that length, else
    None), from a prefix_reads.Reads."""
    low = np.clip(reads.low - reads.data_start, 0, reads.data_length)
    high = np.clip(reads.high - reads.data_start, 0, reads.data_length)
    keep = (high > low) & (reads.group >= 0) & (reads.group < groups)
    group, low, high = reads.group[keep], low[keep], high[keep]
    if not len(group):
        return 0, None, None
    group, low, high, _, before, _ = prefix_reads.sorted_reach(group, low, high)
    new = np.maximum(high - np.maximum(low, before), 0)  # each window's positions no earlier one read
    counts = np.bincount(group, weights=new, minlength=groups).astype(np.int64)
    best = int(np.argmax(counts))
    # each block that reads the most: its span, which is its interval where it has no gap
    lows = np.full(groups, np.iinfo(np.int64).max)
    highs = np.full(groups, -1)
    np.minimum.at(lows, group, low)
    np.maximum.at(highs, group, high)
    most = counts == counts[best]
    aligned = bool(np.all((highs[most] - lows[most] == counts[most]) & (lows[most] % counts[best] == 0)))
    return int(counts[best]), best, ((int(lows[best]), int(highs[best])) if aligned else None)


def predictions(counts: list, sizes: list, full: dict) -> set:
    """The full-size values of every monomial c * (a product of at most _DEGREE sizes) that gives
    each checked count at its sizes (`sizes`: per checked set, the task's sizes by name)."""
    names = sorted(full)
    found = set()
    for degree in range(_DEGREE + 1):
        for chosen in itertools.combinations_with_replacement(names, degree):
            constants = {Fraction(n) / _product(s, chosen) for n, s in zip(counts, sizes)}
            if len(constants) == 1:
                found.add(constants.pop() * _product(full, chosen))
    return found


def _product(sizes: dict, chosen: tuple) -> Fraction:
    value = Fraction(1)
    for name in chosen:
        value *= int(sizes[name])
    return value


def findings(what: str, reads: list, groups: list, sizes: list | None) -> list[Finding]:
    """`reads`: per size set (the checked ones, then the full size), one operand dimension's
    Reads; `groups`: per size set, how many output block ids there are; `sizes`: per size set,
    the task's sizes by name."""
    if not sizes or len(reads) < 3 or any(r is None for r in reads) or any(g is None for g in groups):
        return []
    most = [most_read(r, g) for r, g in zip(reads, groups)]
    counts = [m[0] for m in most]
    # Where checked, the block that reads the most reads one whole aligned segment of the data (a
    # head's keys, one batch's heads, a row block's K): a count that grows with the sizes there.
    # A window that straddles segments (a convolution's chunk and the next, clamped to one chunk
    # where the data has one) is not: its count where checked is no scaling law.
    if not all(counts[:-1]) or any(m[2] is None for m in most[:-1]):
        return []
    expected = predictions(counts[:-1], sizes[:-1], sizes[-1])
    if not expected or counts[-1] >= min(expected):
        return []
    least = min(expected)
    return [Finding(f"{what}: the output block that reads the most of it reads {counts[-1]} positions at the full "
                    f"size, where the checked sizes' {', '.join(str(c) for c in counts[:-1])} follow the sizes to "
                    f"{int(least) if least.denominator == 1 else float(least)} there (the rest of its answer is "
                    f"never computed there)",
                    [(k, m[1], m[2]) for k, m in enumerate(most[:-1])])]
