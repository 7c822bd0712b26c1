"""Reads up to each output block's own position where checked, part of them at the full size.

A causal attention kernel's query block i needs the key positions up to its own rows: an honest
kernel's grid steps for that block read key blocks 0..i at every size. So the rule that an
operand's dimension read whole by every output block where checked must be read whole at the full
size (decision_coverage.per_output_block_problems) says nothing here: no honest output block reads
all of the keys. A fixed window of key blocks i-2..i is then all of S at the checked sizes (one and
three query blocks of 128 rows) and 3 of 32 at the full size: red team round 17, flash attention
14.73x and 6.40x trusted for kernels 28% wrong at S = 768.

What is checked is the shape of the reads, against the output block's own position. Per kernel
operand dimension (its data region: padding added outside the kernel is not counted) and each way
the output's blocks can lie along it (_placements: an output dimension whose extent keeps one ratio
with the data's over every size set; that dimension within output dimensions of single-position
blocks flattened before it; that dimension in segments of a product of the task's sizes), every
output block maps to a segment and a range [lo, hi) of it. Where at every checked size every
output block's grid steps read all of their segment's data before hi (a prefix), and at some
checked size some output block has whole windows before its own start (so the prefix is not the
block itself), every output block must read its prefix at the full size too; likewise a suffix
(an anti-causal walk). An honest sliding window reads part of its prefix where checked already
(when the task's sizes exercise it), and a GEMM's row blocks read no prefix where there are two,
so the rule does not bind them; a window the checked sizes hold whole at block granularity is
asked of the reference (reference_needs.py, through layout_cuts).

Blocks named through scalar-prefetched tables are counted where prefetch_coverage.py walks the
program with its tables' values. Not covered: an output flattened where the operand is not,
output dimensions before the walked one whose blocks hold several positions, and segments that
are not a product of the task's sizes.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np


@dataclasses.dataclass
class OutputBlocks:
    """One output of a kernel at one size set: its extents, the size of its blocks per dimension
    and, per output block id (decision_coverage's group ids), the block's first position per
    dimension (dims x groups; -1 for an id the grid does not have)."""
    extents: tuple
    sizes: tuple
    starts: np.ndarray


def output_blocks(block_mappings, evaluated: dict, inputs: int, groups: np.ndarray, tile_sizes) -> list:
    """Per output mapping (in order), its OutputBlocks; None for one whose blocks are not tiles.
    `groups`: the output block id of every grid position (flat)."""
    group = np.asarray(groups, np.int64).reshape(-1)
    count = int(group.max()) + 1 if group.size else 0
    ids, first = np.unique(group, return_index=True)
    found = []
    for b in range(inputs, len(block_mappings)):
        tiles = tile_sizes(block_mappings[b])
        shape = tuple(int(n) for n in getattr(getattr(block_mappings[b], "array_aval", None), "shape", ()) or ())
        blocks = evaluated.get(b)
        if tiles is None or blocks is None or len(tiles) != len(shape) or blocks.shape[0] != len(shape):
            found.append(None)
            continue
        starts = np.full((len(shape), count), -1, np.int64)
        starts[:, ids] = blocks.reshape(blocks.shape[0], -1)[:, first] * np.asarray(tiles, np.int64)[:, None]
        found.append(OutputBlocks(shape, tuple(int(t) for t in tiles), starts))
    return found


def written_blocks(written: list, groups: np.ndarray, extents: tuple) -> dict:
    """{output index: OutputBlocks} for the outputs a kernel writes by its own copies (left in HBM),
    from the windows its copies write (`written`: (output index, its shape, per dimension a window
    of start and size)) and the output block id of every grid position; an output whose copies
    write windows of different sizes, or a start that moves within one output block, is left out."""
    group = np.asarray(groups, np.int64).reshape(-1)
    count = int(group.max()) + 1 if group.size else 0
    found, sizes = {}, {}
    for index, shape, windows in written:
        if any(w is None or w.stride != 1 for w in windows) or len(windows) != len(shape):
            found[index] = None
            continue
        size = tuple(int(w.size) for w in windows)
        if sizes.setdefault(index, size) != size:
            found[index] = None
            continue
        starts = []
        for w in windows:
            start = np.asarray(w.start)
            if start.ndim > len(extents):
                if any(n > 1 for n in start.shape[len(extents):]):
                    found[index] = None
                    break
                start = start.reshape(start.shape[:len(extents)])
            start = np.broadcast_to(start.reshape(start.shape + (1,) * (len(extents) - start.ndim)), extents)
            starts.append(start.reshape(-1).astype(np.int64))
        else:
            per_group = np.full((len(shape), count), -1, np.int64)
            for d, start in enumerate(starts):
                low = np.full(count, np.iinfo(np.int64).max)
                high = np.full(count, -1)
                np.minimum.at(low, group, start)
                np.maximum.at(high, group, start)
                if np.any((high >= 0) & (low != high)):
                    found[index] = None
                    break
                per_group[d] = np.where(high >= 0, low, -1)
            else:
                earlier = found.get(index, "unset")
                if earlier == "unset" or (earlier is not None and np.array_equal(earlier.starts, per_group)):
                    found[index] = OutputBlocks(tuple(int(n) for n in shape), size, per_group)
                else:  # two writes of one output block at different windows: not one block
                    found[index] = None
    return {k: v for k, v in found.items() if v is not None}


def block_windows(block_mapping, blocks: np.ndarray, groups: np.ndarray, tile_sizes) -> dict | None:
    """{dimension: (its length, output block ids, window starts, window ends)}: the elements each
    output block's grid steps read of an operand through its BlockSpec (`blocks`: components x
    grid positions), the distinct (output block, block) pairs; None where its blocks are not tiles."""
    tiles = tile_sizes(block_mapping)
    shape = tuple(int(n) for n in getattr(getattr(block_mapping, "array_aval", None), "shape", ()) or ())
    blocks = blocks.reshape(blocks.shape[0], -1).astype(np.int64)
    if tiles is None or len(tiles) != len(shape) or blocks.shape[0] != len(shape):
        return None
    group = np.asarray(groups, np.int64).reshape(-1)
    found = {}
    for d, (n, size) in enumerate(zip(shape, tiles)):
        count = max(-(-n // size), 1)
        inside = (blocks[d] >= 0) & (blocks[d] < count)
        pairs = group[inside] * count + blocks[d][inside]
        top = int(pairs.max()) + 1 if pairs.size else 0
        # the distinct (output block, block) pairs: a bitmap where their range is small, else a sort
        pairs = np.flatnonzero(np.bincount(pairs, minlength=top)) if top <= 1 << 26 else np.unique(pairs)
        g, block = pairs // count, pairs % count
        found[d] = (n, g, block * size, np.minimum((block + 1) * size, n))
    return found


def sorted_reach(group, low, high) -> tuple:
    """Windows (output block id, start, end) sorted by id then start, with each one's running
    reach in its id (the furthest end of it and those before it), the reach before it (0 for an
    id's first) and whether it is its id's first."""
    order = np.lexsort((low, group))
    group, low, high = group[order], low[order], high[order]
    offset = group * (int(high.max()) + 1)  # ids kept apart in one running maximum
    reach = np.maximum.accumulate(high + offset) - offset
    before = np.concatenate([[0], reach[:-1]])
    first = np.concatenate([[True], group[1:] != group[:-1]])
    before[first] = 0
    return group, low, high, reach, before, first


def _covered_from(n_groups: int, group, low, high) -> np.ndarray:
    """Per output block id, how far from 0 its windows cover without a gap (windows before 0 are
    clipped to it)."""
    covered = np.zeros(n_groups, np.int64)
    keep = high > 0
    group, low, high = group[keep], np.maximum(low[keep], 0), high[keep]
    if not len(group):
        return covered
    group, low, high, reach, before, start = sorted_reach(group, low, high)
    # a window is reached from 0 when no window of its group before it (nor it) starts past the reach
    gaps = np.cumsum(low > before)
    at_start = np.maximum.accumulate(np.where(start, np.arange(len(group)), 0))
    clear = gaps == np.where(at_start > 0, gaps[np.maximum(at_start - 1, 0)], 0)
    np.maximum.at(covered, group[clear], reach[clear])
    return covered


@dataclasses.dataclass
class Reads:
    """One merged kernel operand's dimension at one size set: the data region's start and length
    (padding added outside the kernel is not data) and the windows each output block's grid steps
    read (ids, starts, ends in the operand's elements)."""
    data_start: int
    data_length: int
    group: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclasses.dataclass
class _Placed:
    """Where each output block (by id; those the grid has) lies in an operand dimension's data, at
    one size set: the start of its segment (a row of a flattened array: one (batch, head)), the
    segment's length, and the block's own positions in it, all in the operand's positions."""
    ids: np.ndarray
    base: np.ndarray
    own_start: np.ndarray
    own_end: np.ndarray
    length: int


def _sides(reads: Reads, placed: _Placed, groups: int) -> tuple:
    """(every output block reads its prefix, the output block with the most whole windows before it
    (its id, and the data positions before it) or None where none has a whole window before it,
    the same two for suffixes, the first block found short) at one size set."""
    low = reads.low - reads.data_start
    high = reads.high - reads.data_start
    base = np.zeros(groups, np.int64)
    base[placed.ids] = placed.base
    end = np.zeros(groups, np.int64)
    end[placed.ids] = placed.base + placed.length
    known = (reads.group >= 0) & (reads.group < groups)
    group, low, high = reads.group[known], low[known], high[known]
    ahead = _covered_from(groups, group, low - base[group], high - base[group])[placed.ids]
    behind = _covered_from(groups, group, end[group] - high, end[group] - low)[placed.ids]
    prefix, suffix = ahead >= placed.own_end, behind >= placed.length - placed.own_start
    size = int(np.max(high - low)) if len(low) else 1
    before, after = None, None
    if len(placed.ids) and placed.own_start.max() >= size:
        k = int(np.argmax(placed.own_start))
        before = (int(placed.ids[k]), int(placed.base[k]), int(placed.base[k] + placed.own_start[k]))
    if len(placed.ids) and (placed.length - placed.own_end).max() >= size:
        k = int(np.argmax(placed.length - placed.own_end))
        after = (int(placed.ids[k]), int(placed.base[k] + placed.own_end[k]), int(placed.base[k] + placed.length))
    short = None
    if not prefix.all():
        k = int(np.flatnonzero(~prefix)[0])
        short = (f"the output block at {int(placed.base[k] + placed.own_start[k])} reads {int(ahead[k])} of the "
                 f"{int(placed.own_end[k])} positions up to its end")
    elif not suffix.all():
        k = int(np.flatnonzero(~suffix)[0])
        short = (f"the output block at {int(placed.base[k] + placed.own_start[k])} reads {int(behind[k])} of the "
                 f"{int(placed.length - placed.own_start[k])} positions from its start")
    return bool(prefix.all()), before, bool(suffix.all()), after, short


@dataclasses.dataclass
class Finding:
    """Output blocks that read all of their prefix (or suffix) where checked and part of it at the
    full size. `shown`: per checked size set (by index) where an output block has whole windows
    before (after) it, (that block's first position and size per output dimension, the data
    positions of the operand dimension before (after) it): the judge asks the reference whether
    that block's answer needs every one of them there (reference_needs.py); a kernel that reads
    a whole prefix the reference does not need where checked (a sliding window the checked sizes
    hold whole at block granularity, though not at the reference's) is not bound."""
    message: str
    output: int
    shown: list
    where: str = ""  # the kernel, as decision_coverage names it


def _placements(blocks: list, lengths: list, sizes: list):
    """(how, [_Placed per size set]) for each way the output's blocks can lie along the operand
    dimension: an output dimension `e` whose extent keeps one ratio with the dimension's data over
    the size sets (the keys' and the queries' S); `e` with output dimensions of single-position
    blocks before it, flattened (keys passed as [B*H*S, D], the output [B, H, S, D]); `e` in
    segments of a product of the task's sizes (both flattened: rows of S within B*H*S)."""
    rank = len(blocks[0].extents)
    for e in range(rank):
        extents = [b.extents[e] for b in blocks]
        if len(set(extents)) == 1 or any(x <= 0 for x in extents) or any(b.sizes[e] <= 0 for b in blocks):
            continue
        others = [d for d in range(rank) if d != e and all(b.sizes[d] == 1 for b in blocks)]
        for outer in _orderings(others):
            spans = [math.prod(b.extents[d] for d in outer) * b.extents[e] for b in blocks]
            ratio = _ratio(lengths, spans)
            if ratio is None:
                continue
            placed = []
            for b in blocks:
                ids = np.flatnonzero(b.starts[e] >= 0)
                segment = np.zeros(len(ids), np.int64)
                for d in outer:
                    segment = segment * b.extents[d] + b.starts[d][ids]
                placed.append(_place(ids, segment * b.extents[e], b.starts[e][ids], b.sizes[e], b.extents[e], ratio))
            how = f"output dimension {e}" + (f" within dimensions {', '.join(map(str, outer))}" if outer else "")
            yield how, placed
        if not sizes:
            continue
        flat = _ratio(lengths, extents)
        for names in _subsets(sorted(sizes[0])):
            segments = [math.prod(int(s[n]) for n in names) for s in sizes]
            # a segment may be the whole dimension at some size set (H = 1 where checked), not at all
            if any(x % L or L % b.sizes[e] for x, L, b in zip(extents, segments, blocks)) or \
                    all(L == x for x, L in zip(extents, segments)):
                continue
            # the operand flattened alike (its positions the output's), or one segment long (its
            # positions those in a segment: keys [B, H, S, D] for an output [B, H*S, D])
            for ratio, flattened in ((flat, True), (_ratio(lengths, segments), False)):
                if ratio is None:
                    continue
                placed = []
                for b, L in zip(blocks, segments):
                    ids = np.flatnonzero(b.starts[e] >= 0)
                    position = b.starts[e][ids]
                    if np.any(position % L + b.sizes[e] > L):
                        break  # a block across two segments
                    placed.append(_place(ids, position // L * L if flattened else np.zeros_like(position),
                                         position % L, b.sizes[e], L, ratio))
                if len(placed) == len(blocks):
                    yield f"output dimension {e} in segments of {' x '.join(names)}", placed


def _place(ids, base, own, tile: int, length: int, ratio: Fraction) -> _Placed:
    """Output positions (segment starts, the blocks' starts in their segments) in the operand's."""
    num, den = ratio.numerator, ratio.denominator
    end = np.minimum(own + tile, length)
    return _Placed(ids, base * num // den, own * num // den, np.minimum(-(-end * num // den), length * num // den),
                   length * num // den)


def _ratio(lengths: list, spans: list) -> Fraction | None:
    if any(n <= 0 for n in lengths) or any(x <= 0 for x in spans):
        return None
    ratios = {Fraction(n, x) for n, x in zip(lengths, spans)}
    return ratios.pop() if len(ratios) == 1 else None


def _orderings(dims: list):
    for k in range(len(dims) + 1):
        yield from itertools.permutations(dims, k)


def _subsets(names: list):
    for k in range(1, len(names) + 1):
        yield from itertools.combinations(names, k)


def findings(what: str, reads: list, outputs: list, sizes: list | None = None) -> list[Finding]:
    """`reads`: per size set (the checked ones, then the full size), one operand's dimension's
    Reads (None where not counted); `outputs`: per size set, the kernel's outputs' OutputBlocks
    (a list per set, None where not known); `sizes`: per size set, the task's sizes by name. Its
    output blocks that read less of their prefix (or suffix) at the full size than at every
    checked size: one Finding at most."""
    if len(reads) < 3 or any(r is None for r in reads) or any(o is None for o in outputs):
        return []
    lengths = [r.data_length for r in reads]
    for o in range(min(len(outs) for outs in outputs)):
        blocks = [outs[o] for outs in outputs]
        if any(b is None for b in blocks) or len({len(b.extents) for b in blocks}) != 1:
            continue
        for how, placed in _placements(blocks, lengths, sizes):
            sides = [_sides(r, p, b.starts.shape[1]) for r, p, b in zip(reads, placed, blocks)]
            checked, full = sides[:-1], sides[-1]
            for whole, shown, name in ((0, 1, "prefix: every position before its end"),
                                       (2, 3, "suffix: every position from its start")):
                if all(s[whole] for s in checked) and any(s[shown] for s in checked) and not full[whole]:
                    evidence = [(k, blocks[k].starts[:, s[shown][0]].tolist(), list(blocks[k].sizes),
                                 (s[shown][1], s[shown][2])) for k, s in enumerate(checked) if s[shown]]
                    return [Finding(f"{what}: every output block's grid steps read its {name} ({how} of output {o}) "
                                    f"at every checked size, and at the full size {full[4]} (the rest of its answer "
                                    f"is never computed there)", o, evidence)]
    return []


def problems(what: str, reads: list, outputs: list, sizes: list | None = None) -> list[str]:
    """findings' messages."""
    return [f.message for f in findings(what, reads, outputs, sizes)]
