"""Data dropped outside the kernels at the full size only: the program's layout, at every size set.

A program that is correct where it is checked and skips work at the full size has to keep a part
of its data that is all of it where checked and less at the full size. Outside the kernels (a
kernel's own reads are counted per output block: decision_coverage.py) that takes a layout
operation: `jnp.pad(x, ...)[:3]` keeps 3 chunks of K (all of 2 and 3 where checked, 3 of 32 at the
full size), `x[:, :2 * K]` keeps the first 2K of N columns (all of them where checked, where
2K >= N; 16384 of 28672 at the full size), a `dynamic_slice` or `gather` of such a size, a
negative pad, a split. The rest of the program may rebuild the output at the full size (rows
written into zeros) and nothing in its answers where checked shows the cut: red team rounds 14 to
16 won trusted estimates of 2.4x to 30x so, and round 16 got past work_ratio.py's work shares
(work that costs nothing added in the kernels, or moved off the MXU).

So each value that follows the inputs carries, per size set and per axis, the interval of its
positions that hold the inputs' data (padding added outside the kernels is not data), through
pads, slices, transposes, broadcasts, reshapes that keep the region contiguous, concatenations,
updates at known positions and element-wise operations. An operation that drops data — a slice, a
`dynamic_slice` or a `gather` keeping less than the data on an axis, a negative pad, a split — and
drops none at every checked size set but some at the full size is a cut: the estimate is not
trusted. Data dropped at the checked sizes too (an honest `x[:, -1]`) is not this: what is
checked is what is paid.

Where the data's positions are not known — a kernel's output, a matmul's, a reshape that
scatters the region, a fixed-trip scan's body — the value is opaque. It keeps how many of its
elements hold data where layout moved them (a reshape moves every element; a kernel's output is
all data): an operation that keeps fewer elements than that at the full size and at least as
many at every checked size is a cut (data written into a buffer of a width of the candidate's
choosing, reshaped out of sight, then cut: red team round 17). Where padding was added upstream,
a share of an axis kept at the full size smaller than at every checked size is a cut too (a fixed
extent of one that grows, another size's extent), with a slack of 1/16 for an honest block
padding sliced back off. Not walked: loops whose trip count follows the
sizes (a chunked loop takes a part per trip and all of it over the trips) and loops of run-time
trip counts (whose estimate is not trusted anyway: tpu_estimate.py).

The programs at the size sets have one skeleton (jaxpr_check.skeleton, checked before this), so
they are walked in step: index 0 .. n-2 are the checked size sets, n-1 the full size.
"""
from __future__ import annotations

import numpy as np

from . import artifact, prefix_reads, read_scaling, tpu_estimate

# Opaque data: the share of an axis a slice keeps at the full size may fall this much below the
# checked sizes' (padding to a block multiple, sliced back off, keeps N of roundup(N, block): a
# share that moves by block / N; a cut that gains from this slack gains at most 1/16).
OPAQUE_SHARE_SLACK = 15 / 16
# Calls whose body runs once, with the call's operands as its inputs.
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "custom_vjp_call_jaxpr", "custom_jvp_call_jaxpr", "remat2", "checkpoint"})


def problems(programs: dict, names: tuple, facts: dict | None = None, sizes: dict | None = None,
             needs=None) -> list[str]:
    """`programs`: size set -> closed jaxpr, one skeleton; `names`: the checked size sets, then
    the full size; `facts`: size set -> decision_coverage.Facts of the same programs, for what the
    kernels' own copies read and each output block's reads (without them, those are not followed
    here); `sizes`: size set -> the task's sizes by name (prefix_reads' segments); `needs`:
    (size set, program input, its dimension, program output, the output block's first positions
    and sizes, the positions [a, b)) -> whether the reference's answer in that block needs every
    one of those positions of the input (reference_needs.py), asked of prefix_reads' findings
    whose operand is a program input and output a program output (None: every finding stands)."""
    jaxprs = [programs[name].jaxpr for name in names]
    walk = _Walk(len(names), [facts.get(name) for name in names] if facts else None)
    walk.sizes = [sizes[name] for name in names] if sizes else None
    inputs = [_Value([_whole(j.invars[i]) for j in jaxprs], False) for i in range(len(jaxprs[0].invars))]
    for i, value in enumerate(inputs):
        value.source = i
    outputs = walk.jaxpr(jaxprs, inputs)
    produced = {value.output: m for m, value in enumerate(outputs) if value is not None and value.output}
    for finding, value, d in walk.prefixes:
        if needs is not None and not _bound(finding, value, d, produced.get((finding.where, finding.output)),
                                            names, needs):
            continue
        walk.found.append(finding.message)
    return list(dict.fromkeys(walk.found))  # one helper applied to operands alike says the same once


def _bound(finding, value, d: int, output, names: tuple, needs) -> bool:
    """Whether a prefix_reads finding stands: where its operand is a program input unpadded and its
    output a program output, only if at some checked size set the reference's answer in the block
    shown needs every position before (after) it."""
    if output is None or value is None or not isinstance(value.source, int) or value.opaque or value.padded:
        return True  # not mapped to the reference's inputs and outputs: the reads alone decide
    if not finding.shown:
        return True  # no block the reference can be asked about
    for k, starts, block, (a, b) in finding.shown:
        try:
            if needs(names[k], value.source, d, output, starts, block, a, b):
                return True
        except Exception:  # the reference could not be asked: the reads alone decide
            return True
    return False


def operand_sources(closed_jaxpr) -> dict:
    """{pallas_call (as decision_coverage names it): per input, a key equal for inputs that hold one
    program input's data in the same positions (the input, element-wise operations of it, the same
    layout operations of it), None where not known}: decision_coverage counts what such operands'
    reads cover together (one array passed as two operands, `A` and `A * 1`, chunk 0 copied from one
    and chunks 1-2 from the other: red team round 17, 8.59x trusted on gemm)."""
    jaxpr = closed_jaxpr.jaxpr
    walk = _Walk(1, None)
    walk.sources = {}
    inputs = [_Value([_whole(v)], False) for v in jaxpr.invars]
    for i, value in enumerate(inputs):
        value.source = i
    walk.jaxpr([jaxpr], inputs)
    return walk.sources


def _shape(var) -> tuple:
    return tuple(int(d) for d in getattr(getattr(var, "aval", None), "shape", ()) or ())


def _whole(var) -> tuple:
    return tuple((0, d) for d in _shape(var))


def _literal(atom):
    return getattr(atom, "val", None)


def _union(regions: list) -> tuple | None:
    regions = [r for r in regions if r is not None]
    if not regions:
        return None
    return tuple((min(a for a, _ in axis), max(b for _, b in axis)) for axis in zip(*regions))


# Same-shape operations that move or mix data across positions: their outputs' data is not their
# operands' positions (element-wise operations keep them).
_MIXING = frozenset({"dot_general", "conv_general_dilated", "cumsum", "cumprod", "cummax", "cummin",
                     "cumlogsumexp", "sort", "fft", "scatter", "scatter-add", "scatter_add", "scatter-mul",
                     "scatter_mul", "scatter-min", "scatter_min", "scatter-max", "scatter_max", "scatter_apply",
                     "select_and_scatter_add", "select_and_gather_add", "reduce_window_sum", "reduce_window_max",
                     "reduce_window_min", "reduce_window", "triangular_solve", "cholesky", "lu", "qr", "eigh",
                     "custom_linear_solve", "top_k", "argsort", "rng_bit_generator", "random_bits", "threefry2x32",
                     "all_gather", "psum", "ppermute", "all_to_all", "linear_solve"})


class _Value:
    """A value that follows the inputs: per size set, the interval of positions holding the
    inputs' data on each axis; `opaque` where that is not known (a kernel's output, a matmul's):
    its regions are then all of it, and `data` how many of its elements hold data per size set
    where layout moved them (None: all of them). `padded`: padding was added somewhere upstream."""
    __slots__ = ("regions", "opaque", "data", "padded", "source", "output")

    def __init__(self, regions: list, opaque: bool, data: list | None = None):
        self.regions = regions
        self.opaque = opaque
        self.data = data
        self.padded = False
        # the program input it is, element for element (through element-wise operations of it, and
        # layout operations named in the key: two values of one key hold the same data alike)
        self.source = None
        # (kernel, its output index) for a kernel's output, through element-wise operations of it
        self.output = None


def _derived(value: _Value, operand: _Value, how: tuple) -> _Value:
    """`value`, made from `operand` by a layout operation `how`: one source with another made the
    same way (the same input's data in the same positions)."""
    if operand.source is not None:
        value.source = (how, operand.source)
    return value


def _data(value: _Value, k: int, var) -> int:
    """How many of the value's elements hold the inputs' data at size set k (`var`: its variable
    there): at most that many can be kept."""
    if not value.opaque:
        return _count([b - a for a, b in value.regions[k]])
    return value.data[k] if value.data is not None else _count(_shape(var))


class _Walk:
    def __init__(self, sets: int, facts: list | None):
        self.sets = sets
        self.facts = facts
        self.found: list[str] = []
        self.sources: dict | None = None  # where -> its kernel's inputs' sources (operand_sources)
        self.sizes: list | None = None  # per size set, the task's sizes by name
        self.prefixes: list = []  # (prefix_reads.Finding with its kernel as `where`, operand value, dimension)

    def jaxpr(self, jaxprs: list, inputs: list, path: str = "program") -> list:
        """Walks `jaxprs` in step from its inputs' values (None: not following the inputs); its
        outputs' values. `path`: where it is, as decision_coverage names it (its Facts' keys)."""
        env = {}
        for var, value in zip(jaxprs[0].invars, inputs):
            env[var] = value
        for n, eqns in enumerate(zip(*[j.eqns for j in jaxprs])):
            ins = [None if hasattr(v, "val") else env.get(v) for v in eqns[0].invars]
            where = f"{path} / {eqns[0].primitive.name} (operation {n + 1})"
            outs = self.eqn(eqns, ins, where) if any(x is not None for x in ins) else [None] * len(eqns[0].outvars)
            upstream = any(x is not None and x.padded for x in ins)
            for o, (var, value) in enumerate(zip(eqns[0].outvars, outs)):
                if value is not None:
                    value.padded = value.padded or upstream or \
                        (not value.opaque and _padded(value, [e.outvars[o] for e in eqns]))
                env[var] = value
        return [None if hasattr(v, "val") else env.get(v) for v in jaxprs[0].outvars]

    def opaque(self, eqns) -> list:
        return [_Value([_whole(eqns[k].outvars[o]) for k in range(self.sets)], True)
                for o in range(len(eqns[0].outvars))]

    def eqn(self, eqns, ins: list, where: str) -> list:
        first = eqns[0]
        name = first.primitive.name
        if name == "pallas_call":
            self.kernel_reads(eqns, ins, where)
            outs = self.opaque(eqns)  # what a kernel makes of what it reads: not followed
            for o, value in enumerate(outs):
                value.output = (where, o)
            return outs
        if name in _CALLS or name in ("cond", "scan"):
            return self.call(eqns, ins, where)
        rule = getattr(self, "_" + name, None)
        if rule is not None:
            return rule(eqns, ins)
        out = first.outvars[0] if len(first.outvars) == 1 else None
        if out is not None and name not in _MIXING and name != "while" and \
                all(_shape(v) == _shape(out) for v in first.invars if not hasattr(v, "val") and _shape(v)):
            # element-wise (scalars broadcast): the union of the operands' data
            shaped = [x for v, x in zip(first.invars, ins) if x is not None and _shape(v) == _shape(out)]
            if shaped:
                value = _Value([_union([x.regions[k] for x in shaped]) for k in range(self.sets)],
                               any(x.opaque for x in shaped))
                sources = {x.source for x in shaped}
                value.source = sources.pop() if len(sources) == 1 else None
                value.output = shaped[0].output if len(shaped) == 1 else None
                return [value]
        return self.opaque(eqns)

    def call(self, eqns, ins: list, where: str) -> list:
        first = eqns[0]
        name = first.primitive.name
        bodies = [list(tpu_estimate._sub(e)) for e in eqns]
        if name == "scan":
            self.loop_keeps(eqns, ins)
            if len({int(e.params.get("length", 0)) for e in eqns}) != 1:
                return self.opaque(eqns)  # trips follow the sizes: a part per trip, all of it over them
            for in_step in zip(*bodies):  # the carry's data may be anywhere: its operands opaque
                self.jaxpr(list(in_step), [_Value([_whole(body.invars[i]) for body in in_step], True)
                                           for i in range(len(in_step[0].invars))], f"{where} body")
            return self.opaque(eqns)
        if name == "cond":  # the index first; each branch takes the rest
            for b, in_step in enumerate(zip(*bodies)):
                self.jaxpr(list(in_step), ins[1:], f"{where} branch {b}")
            return self.opaque(eqns)
        outs = None
        for in_step in zip(*bodies):
            if len(in_step[0].invars) == len(ins):
                outs = self.jaxpr(list(in_step), ins, where)
        if outs is None or len(outs) != len(first.outvars):
            return self.opaque(eqns)
        return outs

    def kernel_reads(self, eqns, ins: list, where: str) -> None:
        """A kernel's blocks of its operands, over its whole grid, as a slice: a grid axis of a fixed
        3 steps naming K chunks 0-2 of an operand padded with K/256 zero chunks reads all of its data
        where checked and 3 of 32 chunks at the full size (red team round 14: the padded operand is
        not read whole at any size, so the per-output-block rule, which counts the operand's blocks,
        saw nothing). The kernel's own copies of an operand left in HBM likewise (copies_read).
        Blocks named through scalar-prefetched tables and bounded slices are not followed here
        (decision_coverage.py counts them per output block)."""
        from . import decision_coverage
        mappings = [e.params.get("grid_mapping") for e in eqns]
        if self.sources is not None:
            first = int(getattr(mappings[0], "num_index_operands", 0) or 0)
            self.sources[where] = [ins[first + b].source if first + b < len(ins) and ins[first + b] is not None
                                   else None for b in range(int(getattr(mappings[0], "num_inputs", 0) or 0))]
            return
        grids = [tuple(getattr(m, "grid", ()) or ()) for m in mappings]
        if not all(isinstance(g, (int,)) or hasattr(g, "__index__") for grid in grids for g in grid):
            return
        self.prefix_reads(eqns, ins, where)
        inputs = int(getattr(mappings[0], "num_inputs", 0) or 0)
        offset = int(getattr(mappings[0], "num_index_operands", 0) or 0)
        # Only operands padded outside the kernels: one the kernel gets whole (or opaque) has its blocks
        # counted against its own shape by decision_coverage already.
        wanted = [b for b in range(inputs) if offset + b < len(ins) and ins[offset + b] is not None and
                  not ins[offset + b].opaque and _padded(ins[offset + b], [e.invars[offset + b] for e in eqns])]
        for b in range(inputs):
            if b not in wanted and offset + b < len(ins) and ins[offset + b] is not None:
                self.read_shares(eqns, where, b)
        if not wanted:
            return
        evaluated = [decision_coverage._block_moves(e, tuple(int(g) for g in grid))[3] for e, grid in zip(eqns, grids)]
        for b in wanted:
            value = ins[offset + b]
            self.copies_read(eqns, where, b, value)
            if not all(b in ev for ev in evaluated):
                continue
            windows = [_block_windows(m.block_mappings[b]) for m in mappings]
            if any(w is None or len(w) != len(value.regions[k]) for k, w in enumerate(windows)):
                continue
            for axis in range(len(windows[0])):
                kept, extent = [], []
                for k in range(self.sets):
                    a, stop = value.regions[k][axis]
                    size, unit, shift = windows[k][axis]
                    starts = np.unique(np.asarray(evaluated[k][b][axis]).reshape(-1).astype(np.int64)) * unit - shift
                    ends = np.maximum.accumulate(starts + size)  # sorted starts: count each element once
                    begins = np.maximum(starts, np.concatenate([[np.iinfo(np.int64).min], ends[:-1]]))
                    overlap = np.minimum(stop, starts + size) - np.maximum(a, begins)
                    kept.append(int(np.clip(overlap, 0, None).sum()))
                    extent.append(stop - a)
                self.cut(eqns, f"the kernel's blocks of its operand {b}", axis, value, kept, extent)

    def prefix_reads(self, eqns, ins: list, where: str) -> None:
        """What each output block reads of each operand up to its own position, by the kernel's blocks
        and its own copies, where checked and at the full size (prefix_reads.py: a fixed window of key
        blocks on a causal axis). One value passed as several operands is one operand here."""
        if not self.facts or any(f is None for f in self.facts):
            return
        outputs = [f.output_blocks.get(where) for f in self.facts]
        if any(o is None for o in outputs):
            return
        mapping = eqns[0].params.get("grid_mapping")
        offset = int(getattr(mapping, "num_index_operands", 0) or 0)
        classes = {}
        for b in range(int(getattr(mapping, "num_inputs", 0) or 0)):
            value = ins[offset + b] if offset + b < len(ins) else None
            key = ("value", id(value)) if value is None or value.source is None else ("source", value.source)
            classes.setdefault(key if value is not None else ("operand", b), []).append(b)
        line = artifact.candidate_line(eqns[0].source_info)
        for members in classes.values():
            b = members[0]
            value = ins[offset + b] if offset + b < len(ins) else None
            for d in range(len(_shape(eqns[0].invars[offset + b]))):
                reads = [self._reads(k, where, members, d, value, _shape(eqns[k].invars[offset + b])[d])
                         for k in range(self.sets)]
                what = f"{f'line {line}' if line else 'a `pallas_call`'}: the kernel's reads of its operand {b} " \
                       f"(dimension {d})"
                found = prefix_reads.findings(what, reads, outputs, self.sizes)
                if not found and not _follows_tables(mapping, b):
                    found = self._scaling(what, reads, outputs, where)
                for finding in found:
                    finding.where = where
                    self.prefixes.append((finding, value, d))

    def _scaling(self, what: str, reads: list, outputs: list, where: str) -> list:
        """read_scaling's findings, in prefix_reads' form (its output 0's block that read the most
        where checked, for the reference to be asked of)."""
        groups = [f.groups.get(where) for f in self.facts]
        found = read_scaling.findings(what, reads, [None if g is None else len(g) for g in groups], self.sizes)
        converted = []
        for finding in found:
            shown = []
            for k, group, interval in finding.shown:
                block = outputs[k][0] if outputs[k] else None
                if block is not None and interval is not None and group is not None and group < block.starts.shape[1]:
                    shown.append((k, block.starts[:, group].tolist(), list(block.sizes), interval))
            converted.append(prefix_reads.Finding(finding.message, 0, shown))
        return converted

    def _reads(self, k: int, where: str, members: list, d: int, value, length: int):
        """prefix_reads.Reads of operands `members` (one value), dimension `d`, at size set k; None
        where some read of it was not counted. What is counted: the loads of its blocks placed in
        the operand (decision_coverage's block_reads) and those at one window of every block
        (block_reads_relative, placed over each member's fetched blocks), both kept under the first
        of operands that are one value; else the blocks its BlockSpecs fetch; and the kernel's own
        copies of an operand left in HBM."""
        facts = self.facts[k]
        present = facts.groups.get(where)
        placed = [facts.block_reads[(where, b, d)] for b in members if (where, b, d) in facts.block_reads]
        relative = [w for b in members for w in facts.block_reads_relative.get((where, b, d), [])]
        loaded = bool(placed or relative)
        windows = []
        for entry in placed:
            if entry is None or present is None:
                return None
            windows += _placed_for_every_block(entry[1], np.flatnonzero(present))
        for b in members:
            if (where, b) in facts.block_windows:
                blocks = facts.block_windows[(where, b)].get(d)
                if blocks is None:
                    return None
                # loads at one window of every block, or (no load counted) the blocks fetched
                windows += _within_blocks(blocks, relative) if relative else [] if loaded else [blocks[1:]]
            elif (where, b, d) in facts.group_reads:  # left in HBM: the kernel's own copies
                entry = facts.group_reads[(where, b, d)]
                if entry is None or present is None:
                    return None
                windows += _placed_for_every_block(entry[1], np.flatnonzero(present))
        if not windows:
            return None
        start, stop = value.regions[k][d] if value is not None else (0, length)
        return prefix_reads.Reads(int(start), int(stop - start), *(np.concatenate(x).astype(np.int64)
                                                                   for x in zip(*windows)))

    def read_shares(self, eqns, where: str, b: int) -> None:
        """The share of operand `b` the kernel reads anywhere on its grid, by its blocks and by its own
        copies (decision_coverage's facts), must not be smaller at the full size than at every
        checked size: one array passed as two operands, chunk 0 copied from one and chunks 1-2 from
        the other, reads neither whole at any size (so the rules that ask whether an operand read
        whole where checked is read whole at the full size see nothing) and 3 of 32 chunks of
        both at the full size (red team round 17: 8.59x trusted on gemm)."""
        if not self.facts or any(f is None for f in self.facts):
            return
        scopes = [f.scopes.get(where) for f in self.facts]
        blocks = [getattr(scope, "reads", {}).get(b) if scope is not None else None for scope in scopes]
        if all(isinstance(r, tuple) and len(r) == 3 and r[1] for r in blocks):
            self.shares(eqns, f"the kernel's blocks of its operand {b}", [(r[0], r[1]) for r in blocks], str(blocks[0][2]))
        reads = [f.dma_reads.get((where, b)) for f in self.facts]
        if all(r is not None for r in reads) and len({len(r) for r in reads}) == 1:
            for axis in range(len(reads[0])):
                if all(r[axis] is not None and len(r[axis]) for r in reads):
                    self.shares(eqns, f"the kernel's copies of its operand {b} (axis {axis})",
                                [(int(np.asarray(r[axis]).sum()), len(r[axis])) for r in reads], "elements")

    def shares(self, eqns, what: str, read: list, unit: str) -> None:
        fractions = [n / of for n, of in read]
        if self.sets < 2 or fractions[-1] >= OPAQUE_SHARE_SLACK * min(fractions[:-1]):
            return
        line = artifact.candidate_line(eqns[0].source_info)
        where = f"line {line}" if line else "a `pallas_call`"
        self.found.append(f"{where}: {what} read {read[-1][0]} of {read[-1][1]} {unit} at the full size, a smaller "
                          f"share than at every checked size ({', '.join(f'{n} of {of}' for n, of in read[:-1])}): "
                          f"work done where checked would be missing at the full size")

    def copies_read(self, eqns, where: str, b: int, value: "_Value") -> None:
        """What the kernel's own copies and loads of operand `b`, left whole in HBM, read over the
        grid (decision_coverage's `dma_reads`), against the operand's data: a loop of a fixed 3 trips
        copying K chunks 0-2 of an operand padded with K/256 zero chunks."""
        if not self.facts or any(f is None for f in self.facts):
            return
        reads = [f.dma_reads.get((where, b)) for f in self.facts]
        shapes = [_shape(e.invars[int(getattr(e.params.get("grid_mapping"), "num_index_operands", 0) or 0) + b])
                  for e in eqns]
        if any(r is None or len(r) != len(shape) for r, shape in zip(reads, shapes)):
            return  # not read through copies of the whole operand
        for axis in range(len(shapes[0])):
            if any(r[axis] is None or len(r[axis]) != shape[axis] for r, shape in zip(reads, shapes)):
                continue  # read at addresses not evaluated: not counted
            kept, extent = [], []
            for k in range(self.sets):
                a, stop = value.regions[k][axis]
                kept.append(int(np.asarray(reads[k][axis][a:stop]).sum()))
                extent.append(stop - a)
            self.cut(eqns, f"the kernel's copies of its operand {b}", axis, value, kept, extent)

    # ---- cuts --------------------------------------------------------------------------------

    def cut(self, eqns, what: str, axis: int, value: "_Value", kept: list[int], extent: list[int]) -> None:
        """`kept` of `extent` data positions (per size set) on `axis` of an operand `value`. Known
        data: a cut when none is dropped at every checked size and some at the full size. Opaque
        data (all of it counted, padding too): a cut when the share kept at the full size is smaller
        than at every checked size (a fixed extent of one that grows, or another size's extent)."""
        if self.sets < 2:
            return  # one program (operand_sources): nothing to compare
        if value.opaque:
            if not value.padded:
                return  # no padding upstream: the count rule (opaque_cut) is the one that applies
            shares = [k / e if e else 1.0 for k, e in zip(kept, extent)]
            if shares[-1] >= OPAQUE_SHARE_SLACK * min(shares[:-1]):
                return
            why = (f"keeps {kept[-1]} of {extent[-1]} on axis {axis} at the full size, a smaller share than at every "
                   f"checked size ({', '.join(f'{k} of {e}' for k, e in zip(kept[:-1], extent[:-1]))})")
        else:
            lost = [e - k for k, e in zip(kept, extent)]
            if any(n > 0 for n in lost[:-1]) or lost[-1] <= 0:
                return
            why = (f"keeps all of the inputs' data on axis {axis} at every checked size "
                   f"({', '.join(str(k) for k in kept[:-1])}) and {kept[-1]} of {extent[-1]} at the full size")
        line = artifact.candidate_line(eqns[0].source_info)
        where = f"line {line}" if line else f"a `{eqns[0].primitive.name}`"
        self.found.append(f"{where}: {what} {why}: work done where checked would be missing at the full size")

    def loop_keeps(self, eqns, ins: list) -> None:
        """A scan's outputs hold at most what its trips read of its operands that follow the inputs
        (a loop-invariant operand its body only slices: the slices' elements per trip; a scanned
        one, or one used otherwise: all of it) and at most their own elements. A cut when that is
        all of those operands' data at every checked size and less at the full size, whatever the
        loop then does with it: a fixed number of trips gathering chunks of K into a buffer, or a
        chunk per trip over K written into a buffer of a fixed width (red team 28: 2.0x to 2.9x
        trusted for 0.55x; the loop's output was counted as all data, its trips not walked)."""
        if self.sets < 2:
            return
        data, kept = [], []
        for k, e in enumerate(eqns):
            length, consts = int(e.params["length"]), int(e.params["num_consts"])
            body = e.params["jaxpr"].jaxpr
            # A carry the body hands back as it got it, behind an optimization barrier or a copy
            # (which jax does not hoist out as it hoists a plain one), is loop-invariant too: its
            # output is its input, not data the loop kept (red team 29).
            passed = _passed_through(body, consts, int(e.params["num_carry"]))
            total = read = 0
            for i, (var, value) in enumerate(zip(e.invars, ins)):
                if value is None:
                    continue
                held = _data(value, k, var)
                total += held
                per_trip = _sliced_per_trip(body, body.invars[i], *passed.get(i, ((), ()))) \
                    if i < consts or i in passed else None
                read += held if per_trip is None else min(held, length * per_trip)
            data.append(total)
            kept.append(min(read, sum(_count(_shape(v)) for o, v in enumerate(e.outvars) if consts + o not in passed)))
        if all(n >= d for n, d in zip(kept[:-1], data[:-1])) and kept[-1] < data[-1]:
            line = artifact.candidate_line(eqns[0].source_info)
            where = f"line {line}: " if line else ""
            self.found.append(f"{where}a `scan` keeps at most {', '.join(str(n) for n in kept)} elements (what its trips "
                              f"read, at most its outputs' size) of operands whose data is "
                              f"{', '.join(str(d) for d in data)} elements at the size sets: all of it where checked, "
                              f"not at the full size: work done where checked would be missing at the full size")

    def opaque_cut(self, eqns, what: str, value: _Value, output: int = 0) -> list | None:
        """An opaque operand: the elements the operation keeps (its output's) against how many of the
        operand's hold data. A cut when they can hold all of it at every checked size and not at the
        full size (data written into a buffer of a width of the candidate's choosing, moved where
        the walk loses its positions, then cut to a fixed extent: red team round 17). The output's
        data count, at most what it keeps."""
        data = [_data(value, k, e.invars[0]) for k, e in enumerate(eqns)]
        kept = [_count(_shape(e.outvars[output])) for e in eqns]
        lost = [max(0, d - n) for d, n in zip(data, kept)]
        if self.sets > 1 and all(n == 0 for n in lost[:-1]) and lost[-1] > 0:
            line = artifact.candidate_line(eqns[0].source_info)
            where = f"line {line}" if line else f"a `{eqns[0].primitive.name}`"
            self.found.append(f"{where}: {what} keeps {', '.join(str(n) for n in kept)} elements of an operand whose "
                              f"data is {', '.join(str(d) for d in data)} elements at the size sets: all of it "
                              f"where checked, not at the full size: work done where checked would be missing "
                              f"at the full size")
        return [min(d, n) for d, n in zip(data, kept)]

    def _slice(self, eqns, ins):
        return [self._window(eqns, ins[0], [e.params["start_indices"] for e in eqns],
                             [e.params["limit_indices"] for e in eqns], [e.params["strides"] for e in eqns], "`slice`")]

    def _dynamic_slice(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        starts = [[_literal(a) for a in e.invars[1:]] for e in eqns]
        sizes = [[int(z) for z in e.params["slice_sizes"]] for e in eqns]
        if all(s is not None for row in starts for s in row):
            limits = [[int(s) + z for s, z in zip(row, size)] for row, size in zip(starts, sizes)]
            return [self._window(eqns, ins[0], starts, limits, [None] * self.sets, "a `dynamic_slice`")]
        # Starts known at run time only: a window of that size keeps at most that much of the data.
        if ins[0].opaque:
            return [_Value([_whole(e.outvars[0]) for e in eqns], True,
                           self.opaque_cut(eqns, "a `dynamic_slice`", ins[0]))]
        for axis in range(len(sizes[0])):
            spans = [ins[0].regions[k][axis] for k in range(self.sets)]
            self.cut(eqns, "a `dynamic_slice`", axis, ins[0], [min(z[axis], b - a) for z, (a, b) in zip(sizes, spans)],
                     [b - a for a, b in spans])
        return self.opaque(eqns)

    def _window(self, eqns, value, starts, limits, strides, what: str, output: int = 0):
        if value is None:
            return None
        axes = []
        for axis in range(len(value.regions[0])):
            kept, extent, spans = [], [], []
            for k in range(self.sets):
                a, b = value.regions[k][axis]
                s, l = int(starts[k][axis]), int(limits[k][axis])
                step = int(strides[k][axis]) if strides[k] is not None else 1
                lo, hi = max(a, s), min(b, l)
                first = lo + (s - lo) % step if hi > lo else hi  # the first position the stride takes
                n = 0 if first >= hi else (hi - 1 - first) // step + 1
                kept.append(n)
                extent.append(b - a)
                spans.append(((first - s) // step, (first - s) // step + n) if n else (0, 0))
            self.cut(eqns, what, axis, value, kept, extent)
            axes.append(spans)
        data = self.opaque_cut(eqns, what, value, output) if value.opaque else None
        return _Value([tuple(axes[axis][k] for axis in range(len(axes))) for k in range(self.sets)], value.opaque, data)

    def _pad(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        value, regions = ins[0], []
        per_axis = []
        for axis in range(len(value.regions[0])):
            kept, extent, spans = [], [], []
            for k, e in enumerate(eqns):
                a, b = value.regions[k][axis]
                low, _, interior = (int(x) for x in e.params["padding_config"][axis])
                size, gap = _shape(e.outvars[0])[axis], interior + 1
                # data position x lands at low + x * gap; those inside [0, size) are kept
                lo_x = max(a, -(low // gap) if low < 0 else 0)
                hi_x = min(b, (size - low + gap - 1) // gap)
                n = max(0, hi_x - lo_x)
                kept.append(n)
                extent.append(b - a)
                spans.append((low + lo_x * gap, low + (hi_x - 1) * gap + 1) if n else (0, 0))
            self.cut(eqns, "a negative `pad`", axis, value, kept, extent)
            per_axis.append(spans)
        for k in range(self.sets):
            regions.append(tuple(per_axis[axis][k] for axis in range(len(per_axis))))
        return [_Value(regions, value.opaque, self.opaque_cut(eqns, "a `pad`", value) if value.opaque else None)]

    def _split(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        axis = int(eqns[0].params["axis"])
        outs = []
        for o in range(len(eqns[0].outvars)):
            starts, limits = [], []
            for e in eqns:
                offset = sum(int(z) for z in e.params["sizes"][:o])
                shape = _shape(e.invars[0])
                starts.append([offset if d == axis else 0 for d in range(len(shape))])
                size = int(e.params["sizes"][o])
                limits.append([offset + size if d == axis else shape[d] for d in range(len(shape))])
            outs.append(self._window(eqns, ins[0], starts, limits, [None] * self.sets, "a `split`", o))
        return outs

    def _gather(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        value = ins[0]
        indexed = set(eqns[0].params["dimension_numbers"].start_index_map)
        for axis in range(len(value.regions[0])):
            if axis in indexed:
                continue  # no index moves it: the slice starts at 0
            spans = [value.regions[k][axis] for k in range(self.sets)]
            sizes = [int(e.params["slice_sizes"][axis]) for e in eqns]
            self.cut(eqns, "a `gather`", axis, value, [max(0, min(b, z) - a) for z, (a, b) in zip(sizes, spans)],
                     [b - a for a, b in spans])
        # Rows picked by index: at most as many of the data's elements as it gathers.
        if value.opaque:
            return [_Value([_whole(e.outvars[0]) for e in eqns], True, self.opaque_cut(eqns, "a `gather`", value))]
        data = [_data(value, k, e.invars[0]) for k, e in enumerate(eqns)]
        taken = [_count(_shape(e.outvars[0])) for e in eqns]
        self.cut(eqns, "a `gather` (all axes)", 0, value, [min(t, d) for t, d in zip(taken, data)], data)
        return self.opaque(eqns)

    def _transpose(self, eqns, ins):
        perm = eqns[0].params["permutation"]
        return [_derived(_Value([tuple(ins[0].regions[k][p] for p in perm) for k in range(self.sets)], ins[0].opaque,
                                ins[0].data), ins[0], ("transpose", tuple(perm)))]

    def _rev(self, eqns, ins):
        out = []
        for k, e in enumerate(eqns):
            shape, axes = _shape(e.invars[0]), set(e.params["dimensions"])
            out.append(tuple((shape[i] - b, shape[i] - a) if i in axes else (a, b)
                             for i, (a, b) in enumerate(ins[0].regions[k])))
        return [_Value(out, ins[0].opaque, ins[0].data)]

    def _squeeze(self, eqns, ins):
        axes = set(eqns[0].params["dimensions"])
        return [_Value([tuple(r for i, r in enumerate(ins[0].regions[k]) if i not in axes)
                        for k in range(self.sets)], ins[0].opaque, ins[0].data)]

    def _broadcast_in_dim(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        out = []
        for k, e in enumerate(eqns):
            shape, operand = _shape(e.outvars[0]), _shape(e.invars[0])
            axes = [(0, d) for d in shape]
            for i, d in enumerate(e.params["broadcast_dimensions"]):
                if operand[i] == shape[d]:
                    axes[d] = ins[0].regions[k][i]
            out.append(tuple(axes))
        return [_Value(out, ins[0].opaque)]

    def _reshape(self, eqns, ins):
        if ins[0] is None:
            return self.opaque(eqns)
        out, opaque = [], ins[0].opaque
        for k, e in enumerate(eqns):
            mapped = None if ins[0].opaque else _reshaped(ins[0].regions[k], _shape(e.invars[0]), _shape(e.outvars[0]))
            if mapped is None:
                opaque = True
            out.append(mapped if mapped is not None else _whole(e.outvars[0]))
        # where the positions are lost, how much data there is is not: a reshape moves every element
        data = [_data(ins[0], k, e.invars[0]) for k, e in enumerate(eqns)] if opaque else None
        return [_derived(_Value(out, opaque, data), ins[0], ("reshape", _shape(eqns[0].outvars[0])))]

    def _concatenate(self, eqns, ins):
        axis = int(eqns[0].params["dimension"])
        out = []
        for k, e in enumerate(eqns):
            parts, offset = [], 0
            for var, value in zip(e.invars, ins):
                if value is not None:
                    r = list(value.regions[k])
                    r[axis] = (r[axis][0] + offset, r[axis][1] + offset)
                    parts.append(tuple(r))
                offset += _shape(var)[axis]
            out.append(_union(parts))
        return [_Value(out, any(x.opaque for x in ins if x is not None))]

    def _dynamic_update_slice(self, eqns, ins):
        starts = [[_literal(a) for a in e.invars[2:]] for e in eqns]
        operand, update = ins[0], ins[1]
        if update is None:
            return [operand]
        if not all(s is not None for row in starts for s in row):
            return self.opaque(eqns)
        out = []
        for k, e in enumerate(eqns):
            shape, size = _shape(e.outvars[0]), _shape(e.invars[1])
            placed = []
            for axis, (a, b) in enumerate(update.regions[k]):
                start = min(max(int(starts[k][axis]), 0), shape[axis] - size[axis])  # clamped, as XLA does
                placed.append((start + a, start + b))
            out.append(_union([tuple(placed), operand.regions[k] if operand else None]))
        return [_Value(out, update.opaque or bool(operand and operand.opaque))]

    def _reduced(self, eqns, ins):
        if ins[0] is None or len(eqns[0].outvars) != 1:
            return self.opaque(eqns)
        axes = set(eqns[0].params.get("axes", ()))
        return [_Value([tuple(r for i, r in enumerate(ins[0].regions[k]) if i not in axes)
                        for k in range(self.sets)], ins[0].opaque)]

    _reduce_sum = _reduce_max = _reduce_min = _reduce_prod = _reduce_and = _reduce_or = _argmax = _argmin = _reduced


def _within_blocks(blocks: tuple, relative: list) -> list:
    """The windows `relative` (start, end in a block) of every block a BlockSpec fetches (its
    length, output block ids, block starts and ends), as (ids, starts, ends)."""
    _, group, low, high = blocks
    return [(group, np.minimum(low + a, high), np.minimum(low + z, high)) for a, z in relative]


def _follows_tables(mapping, b: int) -> bool:
    """Whether operand b's blocks are named through the kernel's scalar-prefetched tables (its index
    map reads them), or it stays in HBM beside such tables (its copies' addresses may read them):
    how many positions one output block reads then follows the tables' data (megablox_gmm's groups:
    a drawn partition), not the sizes, so read_scaling's fit over the sizes does not apply."""
    if not int(getattr(mapping, "num_index_operands", 0) or 0):
        return False
    bm = mapping.block_mappings[b]
    space = str(getattr(getattr(bm, "transformed_block_aval", None), "memory_space", "")).lower()
    if "any" in space or "hbm" in space:
        return True
    jaxpr = bm.index_map_jaxpr.jaxpr
    tables = {id(v) for v in jaxpr.invars[len(mapping.grid):]}
    return any(id(v) in tables for e in jaxpr.eqns for v in e.invars)


def _placed_for_every_block(parts: list, ids: np.ndarray) -> list:
    """decision_coverage's (output block ids, starts, ends) windows, a window read at every grid
    step (id -1) given to every output block in `ids`."""
    placed = []
    for g, a, z in parts:
        every = g < 0
        placed.append((np.concatenate([g[~every], np.repeat(ids, int(every.sum()))]),
                       np.concatenate([a[~every], np.tile(a[every], ids.size)]),
                       np.concatenate([z[~every], np.tile(z[every], ids.size)])))
    return placed


def _block_windows(block_mapping) -> list | None:
    """Per dimension of a block mapping, (window size, what an index counts, how far the window
    starts before it): a block index counts whole blocks, an element offset (`pl.Element`) elements.
    None for other block shapes (bounded slices: not followed)."""
    from jax._src.pallas import core as pallas_core
    out = []
    for d in block_mapping.block_shape:
        if d is None or isinstance(d, pallas_core.Squeezed):
            out.append((1, 1, 0))
        elif isinstance(d, pallas_core.Blocked):
            out.append((int(d.block_size), int(d.block_size), 0))
        elif isinstance(d, pallas_core.Element):
            low, _ = (int(x) for x in (getattr(d, "padding", (0, 0)) or (0, 0)))
            out.append((int(d.block_size), 1, low))
        elif isinstance(d, (int, np.integer)):
            out.append((int(d), int(d), 0))
        else:
            return None
    return out


def _padded(value: _Value, variables: list) -> bool:
    """Whether the value holds positions that are not the inputs' data at some size set."""
    return any(region != _whole(var) for region, var in zip(value.regions, variables))


# What a loop's body may take of a loop-invariant operand per trip, counted by what it keeps.
_SLICING = frozenset({"slice", "dynamic_slice", "gather"})


def _sliced_per_trip(body, var, passing=(), aliases=()) -> int | None:
    """The elements `body` takes of `var` in one trip where it only slices it (at its top level),
    0 where it does not use it; None where it uses it otherwise (then all of it counts). The
    equations in `passing` only hand it back as a carry (_passed_through), and `aliases` are what
    they make of it on the way: slices of those are slices of it, and handing them back is not a use."""
    same = [var, *aliases]
    taken = 0
    for eqn in body.eqns:
        if any(eqn is p for p in passing):
            continue
        uses = [i for i, v in enumerate(eqn.invars) if any(v is a for a in same)]
        if not uses:
            continue
        if eqn.primitive.name not in _SLICING or uses != [0]:
            return None
        taken += _count(_shape(eqn.outvars[0]))
    handed_back = aliases[-1] if aliases else None
    if any(v is a for v in body.outvars for a in same if a is not handed_back):
        return None
    return taken


_HANDING_BACK = frozenset({"optimization_barrier", "copy", "copy_p"})


def _passed_through(body, consts: int, carries: int) -> dict:
    """{operand index: (the equations on the way, the values they make of it, the last handed
    back)} for the carries the body returns as it got them (each output of an optimization
    barrier or a copy is its operand at the same position)."""
    made = {id(v): (eqn, o) for eqn in body.eqns for o, v in enumerate(eqn.outvars)}
    out = {}
    for j in range(carries):
        var, chain, values = body.outvars[j], [], []
        while id(var) in made and made[id(var)][0].primitive.name in _HANDING_BACK:
            eqn, o = made[id(var)]
            chain.append(eqn)
            values.append(var)
            var = eqn.invars[o] if len(eqn.invars) == len(eqn.outvars) else eqn.invars[0]
        if chain and var is body.invars[consts + j]:
            out[consts + j] = (tuple(chain), tuple(reversed(values)))
    return out


def _count(shape) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


def _reshaped(region: tuple, before: tuple, after: tuple) -> tuple | None:
    """`region` of a row-major array of shape `before` seen in shape `after`, where it stays a box;
    None where it does not."""
    if all((a, b) == (0, d) for (a, b), d in zip(region, before)):
        return tuple((0, d) for d in after)
    # Contiguous in row-major order: fixed single indices, then one axis partial, then whole axes.
    partial = next((i for i, ((a, b), d) in enumerate(zip(region, before)) if (a, b) != (0, d)), None)
    if any(b - a != 1 for a, b in region[:partial]) or \
            any((a, b) != (0, d) for (a, b), d in zip(region[partial + 1:], before[partial + 1:])):
        return None
    inner = 1
    for d in before[partial + 1:]:
        inner *= d
    offset = 0
    for i, (a, _) in enumerate(region[:partial]):
        stride = inner
        for d in before[i + 1:partial + 1]:
            stride *= d
        offset += a * stride
    start, stop = offset + region[partial][0] * inner, offset + region[partial][1] * inner
    # The coarsest axis of `after` that the flat interval [start, stop) is a box on.
    for j in range(len(after)):
        inner_after = 1
        for d in after[j + 1:]:
            inner_after *= d
        block = inner_after * after[j]
        if start % inner_after or stop % inner_after or start // block != (stop - 1) // block:
            continue
        axes, rest = [], start // block
        for d in reversed(after[:j]):
            axes.insert(0, (rest % d, rest % d + 1))
            rest //= d
        within = start % block
        axes.append((within // inner_after, within // inner_after + (stop - start) // inner_after))
        axes += [(0, d) for d in after[j + 1:]]
        return tuple(axes)
    return None
