"""One compiled op's final schedule (libtpu's `final_bundles` dump), read as the chip runs it: its
loops with their trip counts, and the DMAs it issues and waits for.

A line of the dump is one VLIW bundle: `0x1f LB: >> { %a = op ... ;; %b = op ... }`. Each `>` is a
region the bundle sits in (a loop, or a predicated region), `LB:` marks where a loop body starts.
The schedule is in SSA form with physical registers (`%s142_s28`), loop-carried values join in
`sphi`, and constants are printed as unsigned 32-bit numbers (4294967232 is -64).

Trip counts are read from a loop's own data flow, never from one constant: the exit test
(`scmp.<cc>.s32 %counter, N`, commented `loop exit test`, or else the predicate of the branch that
closes the loop), the counter's step (`%counter = sadd.s32 S, %phi`), and its start
(`%phi = sphi %init, %copy-of-counter`, `%init = smov K`, or `smov (%p), K` predicated in a branch's
delay slot). A loop from -4 to 0 is 4 trips; one from
-1,000,000,064 to -1,000,000,000 is 64. Anything else (a bound in a register, a counter that is not
a phi, two exit tests that disagree, a count past 2^31) has no count: the caller refuses to trust
the figure, it never guesses.

DMAs: `dma.<kind> ... /*size_in_granules=*/G ... /*dst_syncflagno=*/SEM` starts a copy of G
granules (32 bytes each) that signals SEM; `dma.done.wait SEM, G` waits for it. The copies a
Pallas grid pipeline emits are tagged `pipeline-emitter` (the caller prices them per grid step);
the others are the kernel's own (`pltpu.async_copy`, `make_async_copy`, emit_pipeline's), priced
here wait by wait: see `manual_dma_stall_cycles`.
"""
from __future__ import annotations

import dataclasses
import re

GRANULE_BYTES = 32          # a DMA's size unit (a 256x128 float32 block is 4096 granules)
MAX_TRIPS = 1 << 31

_BUNDLE = re.compile(r"^\s*(?:0x[0-9a-f]+|\d+)\s+([A-Z]{2})?\s*:\s*(>*)\s*\{(.*)$")
_COMMENT = re.compile(r"/\*.*?\*/")
_DEFINITION = re.compile(r"^\s*(%\w+)\s*=\s*([\w.]+)\s*(.*)$")
_OPERATION = re.compile(r"^\s*([\w.]+)\s*(.*)$")
_BRANCH = re.compile(r"sbr\.rel\s*\(\s*(!?)(%\w+)\s*\)\s*target\s*=\s*\$region(\d+)")
_STARTS_REGION = re.compile(r"Start region (\d+)")
# A branch's target: a region that starts at a bundle, or an empty one that starts and ends there
# (`Start/End empty region 33`: the bundle a predicated block falls through to).
_REGION_LABEL = re.compile(r"Start(?:/End empty)? region (\d+)")
_SIZE = re.compile(r"/\*size_in_granules=\*/\s*(%\w+|\d+)")
_SYNC_FLAG = re.compile(r"/\*dst_syncflagno=\*/\s*(\[[^\]]*\]|%\w+)")
_ALLOCATION = re.compile(r"\[\s*#(allocation\d+)\s*(?:\+\s*\$?(0x[0-9a-f]+|\d+))?\s*\]")
_GUARD = re.compile(r"\((!?%\w+)\)")
_PREDICATE_ONLY = re.compile(r"^\(!?%p\w+\)$")
_SCMP = re.compile(r"^scmp\.(eq|ne|lt|le|gt|ge)\.s32")
_IMMEDIATE = re.compile(r"^-?\d+$")
_SPILL_STORE = re.compile(r"^\[smem:\[#(allocation\d+_spill)\]\]\s+(%\w+)$")
_SPILL_LOAD = re.compile(r"^\[smem:\[#(allocation\d+_spill)\]\]$")


@dataclasses.dataclass
class Instruction:
    name: str | None        # the value it defines, if any
    opcode: str
    operands: list[str]     # comma-separated operands, comments removed
    raw: str                # the text as dumped (comments hold the DMA's labelled fields)


@dataclasses.dataclass
class Region:
    depth: int
    is_loop: bool
    first: int               # index of its first bundle
    last: int = -1           # index of its last bundle
    parent: "Region | None" = None
    own: int = 0             # bundles directly in it
    children: list = dataclasses.field(default_factory=list)
    trips: int | None = 1    # a loop's trip count (None: unknown); 1 for a predicated region
    counter: tuple | None = None  # a loop's (counter phi, start, step), when its trip count is known
    labels: tuple = ()       # the dump's region numbers its first bundle starts (a branch's target)

    @property
    def executed_per_entry(self) -> float:
        """Bundles it executes each time it is entered: own + children's, times its trips."""
        trips = self.trips if self.trips is not None else 1
        return trips * self.iteration()

    def iteration(self) -> float:
        """Bundles one trip executes (own + the children's executed bundles)."""
        return self.own + sum(c.executed_per_entry for c in self.children)


@dataclasses.dataclass
class DmaEvent:
    bundle: int
    kind: str                # "start" or "wait"
    granules: int | None     # None: a size in a register that is not a constant
    flag: tuple | None       # (allocation, slot or None when computed at run time)
    pipeline: bool           # emitted by the grid pipeline (`pipeline-emitter`)
    guarded: bool = False    # predicated: runs only on the trips its predicate holds
    guard: str | None = None  # its predicate (`%p` or `!%p`)

    @property
    def bytes(self) -> float:
        return float((self.granules or 0) * GRANULE_BYTES)


@dataclasses.dataclass
class Schedule:
    """The final bundles of one compiled op with its loops and DMAs."""
    bundles: int                 # in the program text
    executed: float              # each bundle times the trip counts of its loops
    by_depth: dict               # loop depth -> bundles at that depth
    loops: list                  # (depth, trip count or None, bundles directly in it), innermost first
    dma_bundles: int             # bundles issuing a DMA (start or wait)
    dma: list = dataclasses.field(default_factory=list)        # DmaEvent, in program order
    weight: list = dataclasses.field(default_factory=list)     # per bundle: how often it runs
    innermost: list = dataclasses.field(default_factory=list)  # per bundle: its innermost loop (Region or None)
    code: list = dataclasses.field(default_factory=list)       # per bundle: its Instructions
    values: "_Values | None" = None                            # the SSA definitions
    depth: list = dataclasses.field(default_factory=list)      # per bundle: its `>` marks (None: an empty bundle)
    labels: list = dataclasses.field(default_factory=list)     # per bundle: the region numbers that start there
    trip_counts: dict | None = None                            # guard_trip_counts, once computed

    @property
    def unknown_trips(self) -> int:
        return sum(1 for _, trips, _ in self.loops if trips is None)

    @property
    def unknown_dma_sizes(self) -> int:
        return sum(1 for e in self.dma if e.granules is None)

    def executed_dma_bytes(self) -> float:
        """Bytes the op's copies move, each times its runs, summed over its DMA streams (the copies
        that signal one sync-flag allocation: one operand's windows, or the result's).

        A stream moves what its starts copy or, where their sizes are in registers (an XLA fusion
        sizes its copies at run time: its last window may be smaller), what its waits wait for,
        whichever is more. Streams are added, never put against each other: a fusion whose one
        operand is copied with a constant size and whose result is written with sizes in registers
        moves both (15p's retention scores: the decay windows, 4.97 GB, and the 4.35 GB of scores;
        the larger of the two alone, before).

        A predicated copy counts the trips its predicate holds on: computed by running the loop's
        own scalar code for every trip (guard_trip_counts: an XLA fusion waits for an operand's
        window only on the trips its window index changes), else read as a stage guard on the
        loop's counter (trips_where); a start that neither reads is taken to run on all but a
        software pipeline's first and last trips, a wait that neither reads counts nothing (never a
        guess upward: the last step of a contraction). Where a copy's sync flag is not known, the
        streams cannot be told apart: all the starts against all the waits, as one stream."""
        counted = guard_trip_counts(self)
        streams: dict = {}
        for e in self.dma:
            runs = self.weight[e.bundle]
            loop = self.innermost[e.bundle]
            key = e.flag[0] if e.flag is not None else None
            started, waited = streams.setdefault(key, [0.0, 0.0])
            if e.bundle in counted:
                # Its trips as the loop's scalar code runs them (its predicate, the branches around it).
                runs *= counted[e.bundle] / loop.trips
            elif e.kind == "start":
                if e.guarded and loop is not None and loop.trips and loop.trips > 2:
                    runs *= (loop.trips - 2) / loop.trips
            elif e.guarded:
                held = trips_where(self.values, loop, e.guard) if e.guard and loop is not None else None
                if held is None:
                    continue
                runs *= held / loop.trips
            if e.kind == "start":
                streams[key][0] = started + e.bytes * runs
            else:
                streams[key][1] = waited + e.bytes * runs
        if None in streams:
            return max(sum(a for a, _ in streams.values()), sum(b for _, b in streams.values()))
        return sum(max(a, b) for a, b in streams.values())

    def dma_bytes(self, pipeline: bool) -> float:
        """Bytes the (pipeline's or the kernel's own) DMA starts copy, each times its runs."""
        return sum(e.bytes * self.weight[e.bundle] for e in self.dma if e.kind == "start" and e.pipeline == pipeline)


def _split(body: str) -> list[Instruction]:
    out = []
    body = body.rsplit("}", 1)[0] if "}" in body else body
    for part in body.split(";;"):
        raw = part.strip()
        if not raw:
            continue
        text = _COMMENT.sub(" ", raw).strip()
        name = None
        match = _DEFINITION.match(text)
        if match:
            name, opcode, rest = match.groups()
        else:
            match = _OPERATION.match(text)
            if not match:
                continue
            opcode, rest = match.groups()
        out.append(Instruction(name, opcode, [o.strip() for o in rest.split(",") if o.strip()], raw))
    return out


def _signed(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


class _Values:
    """The schedule's SSA definitions, for following a value to a constant or through copies."""

    def __init__(self):
        self.defs: dict[str, Instruction] = {}
        self.bundle_of: dict[str, int] = {}
        self.spilled: dict[str, list[str]] = {}   # spill slot -> the values stored to it

    def add(self, instruction: Instruction, bundle: int = -1) -> None:
        if instruction.opcode == "sst" and len(instruction.operands) == 1:
            match = _SPILL_STORE.match(instruction.operands[0])
            if match:
                self.spilled.setdefault(match.group(1), []).append(match.group(2))
        if instruction.name:
            # A name defined twice is not SSA: neither definition can be trusted.
            self.defs[instruction.name] = None if instruction.name in self.defs else instruction
            self.bundle_of[instruction.name] = bundle

    def copy_source(self, name: str, limit: int = 16) -> str:
        """`name` followed back through register copies (`smov %x`) and spill slots (`sld` of a
        slot that one `sst` fills: an XLA fusion's loop counter lives in one when its loop body
        runs out of scalar registers)."""
        for _ in range(limit):
            d = self.defs.get(name)
            if d is not None and d.opcode == "sld" and len(d.operands) == 1:
                match = _SPILL_LOAD.match(d.operands[0])
                stored = self.spilled.get(match.group(1), []) if match else []
                if len(stored) != 1:
                    return name
                name = stored[0]
                continue
            if d is None or d.opcode != "smov" or len(d.operands) != 1 or not d.operands[0].startswith("%"):
                return name
            name = d.operands[0]
        return name

    def constant(self, operand: str) -> int | None:
        operand = operand.strip()
        if _IMMEDIATE.match(operand):
            return _signed(int(operand))
        if not operand.startswith("%"):
            return None
        d = self.defs.get(self.copy_source(operand))
        if d is None or d.opcode != "smov":
            return None
        if len(d.operands) == 1 and _IMMEDIATE.match(d.operands[0]):
            return _signed(int(d.operands[0]))
        # `%x = smov (%p), K` (or `(!%p)`): a move in a branch's delay slot, predicated so that it
        # takes effect only on the path that falls through (a loop's start, set before the loop it
        # enters). %x has this one definition and it writes K: where %x has a value, it is K. The
        # form with a fallback, `smov (%p, %y), K` (K where p holds, else %y), is a select of two
        # values and has no constant.
        if len(d.operands) == 2 and _PREDICATE_ONLY.match(d.operands[0]) and _IMMEDIATE.match(d.operands[1]):
            return _signed(int(d.operands[1]))
        return None


_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def _trips_until(cc: str, start: int, step: int, bound: int) -> int | None:
    """Trips of a do-while loop whose counter, after trip t, is start + t*step and which exits at
    the first t where `counter cc bound` holds."""
    if step == 0:
        return None
    if cc in ("ge", "gt") and step > 0:
        need = bound - start + (1 if cc == "gt" else 0)      # t*step >= need
        t = max(1, -(-need // step))
    elif cc in ("le", "lt") and step < 0:
        need = start - bound + (1 if cc == "lt" else 0)      # t*(-step) >= need
        t = max(1, -(-need // -step))
    elif cc == "eq":
        if (bound - start) % step or (bound - start) // step < 1:
            return None
        t = (bound - start) // step
    else:
        return None  # a loop that never exits this way (or on a wrap-around): no count
    return t if t < MAX_TRIPS else None


def trip_count(values: _Values, predicate: str, exits_when_true: bool) -> int | None:
    """The trip count of a loop closed by `predicate` (see the module's notes), or None."""
    found = loop_counter(values, predicate, exits_when_true)
    return found[3] if found is not None else None


def loop_counter(values: _Values, predicate: str, exits_when_true: bool) -> tuple | None:
    """(the counter's phi, its start, its step, the trip count) of a loop closed by `predicate`,
    or None (see the module's notes)."""
    test = values.defs.get(predicate)
    if test is None:
        return None
    match = _SCMP.match(test.opcode)
    if not match or len(test.operands) != 2:
        return None
    cc = match.group(1)
    a, b = test.operands
    if values.constant(b) is not None and values.constant(a) is None:
        counter, bound = a, values.constant(b)
    elif values.constant(a) is not None and values.constant(b) is None:
        counter, bound, cc = b, values.constant(a), _MIRROR[cc]
    else:
        return None
    if not exits_when_true:
        cc = _NEGATE[cc]
    counter = values.copy_source(counter)
    increment = values.defs.get(counter)
    if increment is None or len(increment.operands) != 2:
        return None
    x, y = increment.operands
    if increment.opcode == "sadd.s32":
        if values.constant(x) is not None and values.constant(y) is None:
            step, phi = values.constant(x), y
        elif values.constant(y) is not None and values.constant(x) is None:
            step, phi = values.constant(y), x
        else:
            return None
    elif increment.opcode == "ssub.s32" and values.constant(y) is not None and values.constant(x) is None:
        step, phi = -values.constant(y), x
    else:
        return None
    join = values.defs.get(values.copy_source(phi))
    if join is None or join.opcode != "sphi" or len(join.operands) != 2:
        return None
    starts = [values.constant(o) for o in join.operands if values.copy_source(o) != counter]
    back = [o for o in join.operands if values.copy_source(o) == counter]
    if len(back) != 1 or len(starts) != 1 or starts[0] is None:
        return None
    trips = _trips_until(cc, starts[0], step, bound)
    return None if trips is None else (values.copy_source(phi), starts[0], step, trips)


def trips_where(values: _Values, loop: "Region", guard: str) -> int | None:
    """On how many of `loop`'s trips a predicate holds (`%p` or `!%p`), when it compares the
    loop's own counter with a constant (a software pipeline's stage guards: `iteration >= 2`);
    None for any other predicate."""
    if loop is None or loop.counter is None:
        return None
    negate, name = guard.startswith("!"), guard.lstrip("!")
    test = values.defs.get(name)
    match = _SCMP.match(test.opcode) if test is not None else None
    if not match or len(test.operands) != 2:
        return None
    cc = match.group(1)
    a, b = test.operands
    if values.constant(b) is not None and values.constant(a) is None:
        x, bound = a, values.constant(b)
    elif values.constant(a) is not None and values.constant(b) is None:
        x, bound, cc = b, values.constant(a), _MIRROR[cc]
    else:
        return None
    phi, start, step = loop.counter
    if values.copy_source(x) != phi:
        return None
    compare = {"eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__, "le": int.__le__, "gt": int.__gt__,
               "ge": int.__ge__}[cc]
    if loop.trips > 1 << 20:
        return None
    return sum(compare(start + t * step, bound) != negate for t in range(loop.trips))


# Bounds on running a loop's scalar code to count its guarded copies (guard_trip_counts): past them
# the copies are counted as before (a stage guard, or nothing), never guessed.
GUARD_SLICE_LIMIT = 400            # instructions the guards depend on
GUARD_WORK_LIMIT = 2_000_000       # trips x those instructions (about 0.5 s)


def _loop_blocks(schedule: "Schedule", loop: Region) -> tuple | None:
    """(the bundles of `loop` that run on every trip, in order; {bundle: the branches that may skip
    it, each as (predicate, negated): it runs where the predicate != negated}). Its own bundles
    (not a nested loop's), then the delay slots of the branch back to its head; a bundle between a
    forward branch (`sbr.rel (%p) target = $regionN`: skip ahead while p holds) and its target
    runs only where the branch is not taken. None when the branches cannot be read (no single
    branch back, a target not found)."""
    n = len(schedule.code)
    start_of: dict = {}
    for b, labels in enumerate(schedule.labels):
        for label in labels:
            start_of.setdefault(label, b)
    branches = []   # (bundle, predicate, negated, target region)
    for b in range(loop.first, min(n, loop.last + 9)):
        for instruction in schedule.code[b]:
            match = _BRANCH.search(instruction.raw)
            if match:
                branches.append((b, match.group(2), match.group(1) == "!", match.group(3)))
    back = [b for b, _, _, target in branches if target in loop.labels]
    if len(back) != 1:
        return None
    back = back[0]
    ranges = []     # (first bundle skipped, the bundle after the last, predicate, negated)
    for b, predicate, negated, target in branches:
        if b >= back or target in loop.labels or schedule.innermost[b] is not loop:
            continue  # the branch back, or a nested loop's own branch (its bundles are not the loop's)
        t = start_of.get(target)
        if t is None or t <= b:
            return None
        # The bundles in between run where the branch is not taken: `(%p)` false, `(!%p)` true.
        ranges.append((b + 1, t, predicate, not negated))
    covered = [0] * (n + 1)
    for first, end, _, _ in ranges:
        covered[first] += 1
        covered[end] -= 1
    depth, every = 0, []
    for b in range(loop.first, back + 1):
        depth += covered[b] if b > loop.first else sum(covered[:b + 1])
        if depth == 0 and schedule.innermost[b] is loop:
            every.append(b)
    skips = _RangeConditions(ranges)
    # The delay slots: the bundles after the branch back that the dump still marks as the loop's.
    b = back + 1
    while b < n and (schedule.depth[b] is None or schedule.depth[b] >= 1) and b - back <= 8 \
            and schedule.innermost[b] in (None, loop):   # not the next loop's head
        every.append(b)
        b += 1
    return every, skips


class _RangeConditions:
    """{bundle: [(predicate, negated)]} of the branches whose skipped ranges hold the bundle."""

    def __init__(self, ranges):
        self.ranges = ranges

    def get(self, bundle, default=None):
        found = [(p, negated) for first, end, p, negated in self.ranges if first <= bundle < end]
        return found if found else default


def guard_trip_counts(schedule: "Schedule") -> dict:
    """{bundle of a DMA start or wait in a loop that does not run on every trip: on how many trips
    of its loop it runs}, found by running the loop's own scalar code (the instructions its
    predicate and the predicates of the branches around it depend on, spill slots included) for
    every trip, as the chip does. An XLA fusion's pipeline fetches and waits for an operand's next
    window only on the trips its window index changes (`por` of "first trip" and "index !=
    previous index", or a branch on it); no single comparison says how often that is.

    A loop is left out (its copies counted as before) when a predicate depends on anything this
    cannot run: a value loaded from memory other than a spill slot, a block a branch may skip, a
    nested loop's value, a phi whose start is not before the loop, an opcode _Machine does not
    know; or past GUARD_SLICE_LIMIT / GUARD_WORK_LIMIT."""
    values = schedule.values
    if values is None:
        return {}
    if schedule.trip_counts is not None:
        return schedule.trip_counts
    stores: dict = {}    # spill slot -> the names of the `sst` instructions that fill it
    position: dict = {}  # instruction name -> (bundle, index in the bundle)
    for b, code in enumerate(schedule.code):
        for i, instruction in enumerate(code):
            if instruction.name:
                position[instruction.name] = (b, i)
            if instruction.opcode == "sst" and len(instruction.operands) == 1 and instruction.name:
                match = _SPILL_STORE.match(instruction.operands[0])
                if match:
                    stores.setdefault(match.group(1), []).append(instruction.name)
    by_loop: dict = {}
    for e in schedule.dma:
        loop = schedule.innermost[e.bundle]
        if loop is not None and loop.trips:
            by_loop.setdefault(id(loop), (loop, []))[1].append(e)
    out: dict = {}
    for loop, events in by_loop.values():
        blocks = _loop_blocks(schedule, loop)
        if blocks is None:
            continue
        every, skips = blocks
        conditions = {}
        for e in events:
            condition = list(skips.get(e.bundle, []))
            guard = _event_guard(schedule, e)
            if guard:
                condition.append((guard.lstrip("!"), guard.startswith("!")))
            if condition:
                conditions[e.bundle] = condition
        if not conditions:
            continue
        held = _run_conditions(schedule, loop, every, conditions, position, stores)
        if held is not None:
            out.update(held)
    schedule.trip_counts = out
    return out


def _event_guard(schedule: "Schedule", e: DmaEvent) -> str | None:
    if e.guard or not e.guarded:
        return e.guard
    instruction = next((i for i in schedule.code[e.bundle] if i.opcode.startswith("dma.")
                        and (e.kind == "wait") == (i.opcode == "dma.done.wait")), None)
    match = _GUARD.search(instruction.operands[0]) if instruction is not None and instruction.operands else None
    return match.group(1) if match else None


def _run_conditions(schedule: "Schedule", loop: Region, every: list, conditions: dict, position: dict,
                    stores: dict) -> dict | None:
    """{bundle: trips on which all its (predicate, negated) conditions hold (predicate != negated)},
    or None. position: instruction name -> (bundle, index); stores: spill slot -> its `sst`s."""
    values = schedule.values
    in_body = set(every)

    def backward_slice(predicate: str) -> set | None:
        """The instructions `predicate` depends on, or None where one cannot be run each trip."""
        needed: set = set()
        work = [predicate]
        while work:
            name = work.pop()
            if name in needed:
                continue
            needed.add(name)
            if len(needed) > GUARD_SLICE_LIMIT:
                return None
            d = values.defs.get(name)
            if d is None or name not in position:
                return None
            b = position[name][0]
            if b not in in_body and not (b < loop.first and schedule.innermost[b] is None):
                return None
            if d.opcode == "sld":
                match = _SPILL_LOAD.match(d.operands[0]) if len(d.operands) == 1 else None
                if match is None:
                    return None
                work.extend(stores.get(match.group(1), []))
                continue
            if d.opcode == "sst":
                work.append(_SPILL_STORE.match(d.operands[0]).group(2))
                continue
            if d.opcode == "sphi" and b in in_body and None in _phi_operands(values, d, loop):
                return None
            for operand in d.operands:
                work.extend(_NAMES.findall(operand))
        return needed

    slices = {name: backward_slice(name) for condition in conditions.values() for name, _ in condition}
    # A copy whose conditions cannot all be run is left out (counted as before).
    conditions = {bundle: condition for bundle, condition in conditions.items()
                  if all(slices[name] is not None for name, _ in condition)}
    predicates = sorted({name for condition in conditions.values() for name, _ in condition})
    if not predicates:
        return None
    needed = set().union(*(slices[name] for name in predicates))
    if len(needed) > GUARD_SLICE_LIMIT:
        return None
    if loop.trips * len(needed) > GUARD_WORK_LIMIT:
        return None
    ordered = [values.defs[n] for n in _bundle_order(values, needed, position)]
    program = _trip_program(ordered, [position[i.name][0] < loop.first for i in ordered],
                            {i.name: _phi_operands(values, i, loop) for i in ordered
                             if i.opcode == "sphi" and position[i.name][0] >= loop.first},
                            predicates, list(conditions.values()))
    if program is None:
        return None
    try:
        counts = program(loop.trips)
    except (_Unknown, NameError, TypeError, ValueError):
        return None   # a value the code could not compute reached a predicate
    return dict(zip(conditions, counts))


class _Unknown(Exception):
    pass


def _boolean(value):
    if type(value) is not bool:
        raise _Unknown
    return value


def _signed_expr(expression: str) -> str:
    return f"((({expression}) + 0x80000000) & 0xFFFFFFFF) - 0x80000000"


_BINARY = {
    "sadd.s32": "{a} + {b}", "ssub.s32": "{a} - {b}", "smul.u32": "{a} * {b}", "smul.s32": "{a} * {b}",
    "sand.u32": "{a} & {b}", "sor.u32": "{a} | {b}", "sxor.u32": "{a} ^ {b}", "sshll.u32": "{a} << ({b} & 31)",
    "sshrl.u32": "({a} & 0xFFFFFFFF) >> ({b} & 31)", "sshra.s32": "{a} >> ({b} & 31)",
    "smin.s32": "min({a}, {b})", "smax.s32": "max({a}, {b})",
    "smin.u32": "min({a} & 0xFFFFFFFF, {b} & 0xFFFFFFFF)", "smax.u32": "max({a} & 0xFFFFFFFF, {b} & 0xFFFFFFFF)",
}
_PREDICATE = {"por": "({a} or {b})", "pand": "({a} and {b})", "pnand": "(not ({a} and {b}))",
              "pnor": "(not ({a} or {b}))", "pxor": "({a} != {b})"}
_PYTHON_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_REGISTER = re.compile(r"^%(\w+)$", re.ASCII)


def _trip_program(ordered: list, before_loop: list, phis: dict, predicates: list, conditions: list):
    """The loop's slice as one Python function of the trip count (the scalar code run as the chip
    runs it, a trip at a time), returning for each condition the trips it holds on; None where an
    instruction is not one this knows. Only register names (`%s12_s3`), spill slots and integers
    from the dump reach the generated text, each checked against its pattern first."""
    def var(operand: str) -> str | None:
        operand = operand.strip()
        if _IMMEDIATE.match(operand):
            return str(_signed(int(operand)))
        match = _REGISTER.match(operand)
        return "r_" + match.group(1) if match else None

    def statement(instruction: Instruction) -> str | None:
        target = var(instruction.name or "")
        if target is None:
            return None
        if instruction.opcode == "sst":
            slot, stored = _SPILL_STORE.match(instruction.operands[0]).groups()
            return f"m_{slot} = {var(stored)}" if var(stored) else None
        if instruction.opcode == "sld":
            return f"{target} = m_{_SPILL_LOAD.match(instruction.operands[0]).group(1)}"
        ops = list(instruction.operands)
        guard = old = None
        if ops and ops[0].startswith("("):
            if ops[0].endswith(")"):
                guard = ops.pop(0)[1:-1]
            elif len(ops) > 1 and ops[1].endswith(")"):
                guard, old = ops.pop(0)[1:], ops.pop(0)[:-1]
        args = [var(o) for o in ops]
        if None in args:
            return None
        code = instruction.opcode
        if code == "smov" and len(args) == 1:
            value = args[0]
        elif code in _BINARY and len(args) == 2:
            value = _signed_expr(_BINARY[code].format(a=args[0], b=args[1]))
        elif code.startswith("scmp.") and len(args) == 2 and code.split(".")[1] in _PYTHON_COMPARE:
            a, b = args
            if ".u32" in code:
                a, b = f"({a} & 0xFFFFFFFF)", f"({b} & 0xFFFFFFFF)"
            value = f"({a} {_PYTHON_COMPARE[code.split('.')[1]]} {b})"
        elif code == "scalar_select" and len(args) == 3:
            value = f"({args[1]} if _boolean({args[0]}) else {args[2]})"
        elif code == "pneg" and len(args) == 1:
            value = f"(not _boolean({args[0]}))"
        elif code in _PREDICATE and len(args) == 2:
            value = _PREDICATE[code].format(a=f"_boolean({args[0]})", b=f"_boolean({args[1]})")
        else:
            return None
        if guard is None:
            return f"{target} = {value}"
        p = var(guard.lstrip("!"))
        if p is None or (old is not None and var(old) is None):
            return None
        test = f"(not _boolean({p}))" if guard.startswith("!") else f"_boolean({p})"
        return f"{target} = {value} if {test} else {var(old) if old is not None else 'None'}"

    prologue, body = [], []
    for instruction, before in zip(ordered, before_loop):
        if instruction.opcode == "sphi" and not before:
            continue
        line = statement(instruction)
        if line is None:
            return None
        (prologue if before else body).append(line)
    joins = [(var(name), var(init), var(back)) for name, (init, back) in phis.items()]
    if any(None in j for j in joins):
        return None
    checks = [f"_boolean({var(p)})" for p in predicates]
    tests = [" and ".join(f"({var(n)} != {negated})" for n, negated in condition) for condition in conditions]
    lines = ["def program(trips):"] + ["    " + line for line in prologue]
    lines += [f"    {target} = {init}" for target, init, _ in joins]
    lines += [f"    held_{k} = 0" for k in range(len(tests))]
    lines += ["    for _ in range(trips):"] + ["        " + line for line in body]
    lines += ["        " + check for check in checks]
    lines += [f"        if {test}:\n            held_{k} += 1" for k, test in enumerate(tests)]
    if joins:
        lines += ["        " + ", ".join(t for t, _, _ in joins) + " = " + ", ".join(b for _, _, b in joins)]
    lines += ["    return [" + ", ".join(f"held_{k}" for k in range(len(tests))) + "]"]
    scope = {"_boolean": _boolean}
    exec(compile("\n".join(lines), "<loop slice>", "exec"), scope)   # noqa: S102 (checked names only)
    return scope["program"]


_NAMES = re.compile(r"%\w+")


def _bundle_order(values: _Values, names: set, position: dict) -> list:
    """`names` in the order they run: bundle by bundle; in a bundle the phis first, then each
    instruction after those of the same bundle it reads (a bundle may use a value it defines:
    `%a = sshll %x, 4 ;; %b = int_to_ptr %a`)."""
    by_bundle: dict = {}
    for name in names:
        by_bundle.setdefault(position[name][0], []).append(name)
    out = []
    for b in sorted(by_bundle):
        pending = sorted(by_bundle[b], key=lambda n: (values.defs[n].opcode != "sphi", position[n][1]))
        placed: set = set()
        while pending:
            for name in pending:
                d = values.defs[name]
                reads = set() if d.opcode == "sphi" else {x for o in d.operands for x in _NAMES.findall(o)}
                if not (reads & set(pending)) or reads & set(pending) <= placed:
                    break
            else:
                name = pending[0]   # a cycle within a bundle: keep the dump's order
            pending.remove(name)
            placed.add(name)
            out.append(name)
    return out


def _flag(values: _Values, text: str) -> tuple | None:
    """A DMA's sync flag as (allocation, slot): the slot is None when computed at run time."""
    text = text.strip()
    match = _ALLOCATION.match(text)
    if match:
        return match.group(1), int(match.group(2) or "0", 0)
    if text.startswith("%"):
        d = values.defs.get(values.copy_source(text))
        if d is not None and d.operands:
            inner = _ALLOCATION.search(" ".join(d.operands))
            if inner and d.opcode == "smov":
                return inner.group(1), int(inner.group(2) or "0", 0)
            if inner:
                return inner.group(1), None
    return None


def _dma_event(values: _Values, index: int, instruction: Instruction) -> DmaEvent | None:
    if not instruction.opcode.startswith("dma."):
        return None
    pipeline = "pipeline-emitter" in instruction.raw
    if instruction.opcode == "dma.done.wait":
        operands = [o for o in instruction.operands if not o.startswith("(")]
        if len(operands) < 2:
            return DmaEvent(index, "wait", None, None, pipeline)
        guard = _GUARD.search(instruction.operands[0]) if instruction.operands else None
        return DmaEvent(index, "wait", values.constant(operands[-1]), _flag(values, operands[-2]), pipeline,
                        guard is not None, guard.group(1) if guard else None)
    if instruction.opcode.startswith("dma.done"):
        return None
    size, flag = _SIZE.search(instruction.raw), _SYNC_FLAG.search(instruction.raw)
    granules = values.constant(size.group(1)) if size else None
    guarded = bool(instruction.operands and _GUARD.search(instruction.operands[0]))
    return DmaEvent(index, "start", granules, _flag(values, flag.group(1)) if flag else None, pipeline, guarded)


def parse_schedule(text: str) -> Schedule:
    lines = []
    for line in text.splitlines():
        match = _BUNDLE.match(line)
        if match:
            lines.append(match.groups())
    values = _Values()
    parsed = []
    for index, (marker, arrows, body) in enumerate(lines):
        instructions = [] if body.strip().startswith("}") else _split(body)
        for instruction in instructions:
            values.add(instruction, index)
        parsed.append((marker, len(arrows), instructions, body))

    top = Region(0, False, 0)
    stack: list[Region] = []
    innermost_region: list[Region] = []
    by_depth: dict = {}
    dma_bundles = 0
    tests: dict[int, list] = {}     # id(loop) -> [(predicate, exits_when_true)] from `loop exit test`
    branches: list = []             # (predicate, exits_when_true, target region number)

    def owner() -> Region:
        return stack[-1] if stack else top

    def close(index: int) -> None:
        region = stack.pop()
        region.last = index - 1
        owner().children.append(region)

    for index, (marker, depth, instructions, body) in enumerate(parsed):
        if body.strip().startswith("}"):  # an empty bundle: no marks, the current region's
            owner().own += 1
            innermost_region.append(owner())
            by_depth[len(stack)] = by_depth.get(len(stack), 0) + 1
            continue
        by_depth[depth] = by_depth.get(depth, 0) + 1
        dma_bundles += any(i.opcode.startswith("dma.") for i in instructions)
        while len(stack) > depth:
            close(index)
        if marker == "LB" and depth > 0 and len(stack) == depth and stack[-1].own > 0:
            close(index)  # a new loop where a region of the same depth was
        while len(stack) < depth:
            inner = len(stack) + 1 == depth
            region = Region(len(stack) + 1, inner and marker == "LB", index, parent=owner())
            region.trips = None if region.is_loop else 1
            if region.is_loop:
                region.labels = tuple(_STARTS_REGION.findall(body.rsplit("}", 1)[-1]))
            stack.append(region)
        owner().own += 1
        innermost_region.append(owner())
        for instruction in instructions:
            match = _BRANCH.search(instruction.raw)
            if match:  # `sbr.rel (!%p) target = $regionN`: back to N while p is false
                branches.append((match.group(2), match.group(1) == "!", match.group(3)))
            if "loop exit test" in instruction.raw and instruction.name and stack:
                loop = next((r for r in reversed(stack) if r.is_loop), None)
                if loop is not None:
                    tests.setdefault(id(loop), []).append((instruction.name, True))
    while stack:
        close(len(parsed))

    loops: list[Region] = []

    def visit(region: Region) -> None:
        for child in region.children:
            visit(child)
        if region.is_loop:
            # The branches back to the loop's first bundle decide; the commented exit test only
            # where no branch names it.
            back = [(p, exits) for p, exits, target in branches if target in region.labels]
            candidates = back or tests.get(id(region), [])
            found = {loop_counter(values, p, exits) for p, exits in candidates}
            counted = found.pop() if len(found) == 1 else None
            region.trips = counted[3] if counted is not None else None
            region.counter = counted[:3] if counted is not None else None
            loops.append(region)

    visit(top)
    # How often each bundle runs: the product of its loops' trip counts (unknown counts once).
    weight = []
    innermost = []
    for region in innermost_region:
        w, loop, r = 1.0, None, region
        while r is not None:
            if r.is_loop:
                w *= r.trips if r.trips is not None else 1
                loop = loop or r
            r = r.parent
        weight.append(w)
        innermost.append(loop)
    dma = []
    for index, (_, _, instructions, _) in enumerate(parsed):
        for instruction in instructions:
            event = _dma_event(values, index, instruction)
            if event is not None:
                dma.append(event)
    # The grid pipeline tags its waits only: its starts are those signalling the same flags.
    pipeline_flags = {e.flag for e in dma if e.kind == "wait" and e.pipeline and e.flag is not None}
    for e in dma:
        if e.kind == "start" and any(_same_flag(e.flag, f) for f in pipeline_flags):
            e.pipeline = True
    depth = [None if body.strip().startswith("}") else d for _, d, _, body in parsed]
    labels = [tuple(_REGION_LABEL.findall(body.rsplit("}", 1)[-1])) for _, _, _, body in parsed]
    return Schedule(bundles=len(parsed), executed=top.own + sum(c.executed_per_entry for c in top.children),
                    by_depth=by_depth, loops=[(r.depth, r.trips, r.own) for r in loops], dma_bundles=dma_bundles,
                    dma=dma, weight=weight, innermost=innermost, code=[p[2] for p in parsed], values=values,
                    depth=depth, labels=labels)


def _runs(loop: Region | None) -> float:
    w, r = 1.0, loop
    while r is not None:
        if r.is_loop:
            w *= r.trips if r.trips is not None else 1
        r = r.parent
    return w


def _child_of(loop: Region | None, region: Region | None) -> Region | None:
    """The region directly in `loop` (or at the top, loop None) that holds `region`; None when
    `region` is `loop` itself or not inside it."""
    child = None
    while region is not None and region is not loop:
        child, region = region, region.parent
    return child if region is loop else None


def _same_flag(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return False
    return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


_ARITHMETIC = {
    "sadd.s32": lambda a, b: a + b, "ssub.s32": lambda a, b: a - b, "smul.u32": lambda a, b: a * b,
    "smul.s32": lambda a, b: a * b, "sand.u32": lambda a, b: a & b, "sor.u32": lambda a, b: a | b,
    "sxor.u32": lambda a, b: a ^ b, "sshll.u32": lambda a, b: a << (b & 31),
    "sshrl.u32": lambda a, b: (a & 0xFFFFFFFF) >> (b & 31), "sshra.s32": lambda a, b: a >> (b & 31),
    "smin.s32": min, "smax.s32": max,
    "smin.u32": lambda a, b: _signed(min(a & 0xFFFFFFFF, b & 0xFFFFFFFF)),
    "smax.u32": lambda a, b: _signed(max(a & 0xFFFFFFFF, b & 0xFFFFFFFF)),
}
_LOGIC = {"pnand": lambda a, b: not (a and b), "por": lambda a, b: a or b, "pand": lambda a, b: a and b,
          "pnor": lambda a, b: not (a or b), "pxor": lambda a, b: a != b}
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


class _Machine:
    """Runs a schedule's scalar instructions (integers, predicates, sync-flag addresses) to learn
    which sync flag each DMA signals or waits on, trip by trip. A value it cannot compute (a load,
    an op it does not know) is None, and so is everything computed from it."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.env: dict = {}
        self.spills: dict = {}   # spill slot -> the value last stored to it (`sst`), as the loop ran

    def operand(self, text: str):
        text = text.strip()
        if _IMMEDIATE.match(text):
            return _signed(int(text))
        match = _ALLOCATION.match(text)
        if match:
            return ("flag", match.group(1), int(match.group(2) or "0", 0))
        return self.env.get(text) if text.startswith("%") else None

    def run(self, instruction: Instruction, phi_value=None) -> None:
        # A scalar kept in a spill slot (a grid loop's counter when its body runs out of scalar
        # registers): its store and its reload, in the order the bundles run.
        if instruction.opcode == "sst" and len(instruction.operands) == 1:
            match = _SPILL_STORE.match(instruction.operands[0])
            if match:
                self.spills[match.group(1)] = self.operand(match.group(2))
        if not instruction.name:
            return
        if instruction.opcode == "sld" and len(instruction.operands) == 1:
            match = _SPILL_LOAD.match(instruction.operands[0])
            if match:
                self.env[instruction.name] = self.spills.get(match.group(1))
                return
        ops = list(instruction.operands)
        # A predicated instruction: `op (%p), a, b` runs when p holds; `op (%p, %old), a, b` is
        # `p ? op(a, b) : old` (a select in SSA form).
        guard, old = None, None
        if ops and ops[0].startswith("("):
            if ops[0].endswith(")"):
                guard = ops.pop(0)[1:-1]
            elif len(ops) > 1 and ops[1].endswith(")"):
                guard, old = ops.pop(0)[1:], ops.pop(0)[:-1]
        if guard is not None:
            truth = self.operand(guard.lstrip("!"))
            if not isinstance(truth, bool):
                self.env[instruction.name] = None
                return
            if guard.startswith("!"):
                truth = not truth
            if not truth:
                self.env[instruction.name] = self.operand(old) if old is not None else None
                return
        code, value = instruction.opcode, None
        args = [self.operand(o) for o in ops]
        ints = all(isinstance(a, int) and not isinstance(a, bool) for a in args)
        if code == "sphi":
            value = phi_value
        elif code == "smov" and len(args) == 1:
            value = args[0]
        elif code in _ARITHMETIC and len(args) == 2 and ints:
            value = _signed(_ARITHMETIC[code](*args))
        elif _SCMP.match(code) or code.startswith("scmp."):
            cc = code.split(".")[1]
            if cc in _COMPARE and len(args) == 2 and ints:
                a, b = args
                if ".u32" in code:
                    a, b = a & 0xFFFFFFFF, b & 0xFFFFFFFF
                value = _COMPARE[cc](a, b)
        elif code == "scalar_select" and len(args) == 3 and isinstance(args[0], bool):
            value = args[1] if args[0] else args[2]
        elif code == "pneg" and len(args) == 1 and isinstance(args[0], bool):
            value = not args[0]
        elif code in _LOGIC and len(args) == 2 and all(isinstance(a, bool) for a in args):
            value = _LOGIC[code](*args)
        elif code == "scalar_lea.sflag" and len(args) == 2 and isinstance(args[0], tuple) and isinstance(args[1], int):
            value = ("flag", args[0][1], args[0][2] + args[1])
        elif code == "scalar_lea.sflag" and len(ops) == 2 and isinstance(args[0], tuple) and \
                isinstance(self.operand(ops[1].split()[0]), int):
            # `scalar_lea.sflag %flag, 2 [#allocation5]`: a flag further into the same allocation.
            value = ("flag", args[0][1], args[0][2] + self.operand(ops[1].split()[0]))
        self.env[instruction.name] = value

    def guard(self, instruction: Instruction):
        """Whether a predicated instruction runs (None: not predicated, or not computable)."""
        match = _GUARD.search(instruction.operands[0]) if instruction.operands else None
        if match is None:
            return None
        text = match.group(1)
        truth = self.operand(text.lstrip("!"))
        if not isinstance(truth, bool):
            return None
        return (not truth) if text.startswith("!") else truth

    def flag(self, instruction: Instruction):
        """The (allocation, slot) a DMA start signals or a wait waits on, or None."""
        if instruction.opcode == "dma.done.wait":
            ops = [o for o in instruction.operands if not o.startswith("(")]
            value = self.operand(ops[-2]) if len(ops) >= 2 else None
        else:
            match = _SYNC_FLAG.search(instruction.raw)
            value = self.operand(match.group(1)) if match else None
        return (value[1], value[2]) if isinstance(value, tuple) else None


def _phi_operands(values: _Values, instruction: Instruction, region: Region) -> tuple:
    """(initial value, value from the previous trip) of a phi at the head of `region`."""
    ops = [o for o in instruction.operands if not o.startswith("(")]
    if len(ops) != 2:
        return None, None
    before = [o for o in ops if values.bundle_of.get(o, -1) < region.first]
    after = [o for o in ops if o not in before]
    return (before[0] if len(before) == 1 else None), (after[0] if len(after) == 1 else None)


def _play(schedule: Schedule, loop: Region | None, trips_played: int):
    """The kernel's own DMA events of `loop` (or of the top level), with the sync flag each one
    really uses: the bundles before the loop once, then `trips_played` trips of it. Returns
    [(trip or -1, time, kind, flag, bytes)] with a trip's bundles at their executed weight, or
    None when a flag cannot be computed."""
    machine = _Machine(schedule)
    values = schedule.values
    n = len(schedule.code)
    first, last = (loop.first, loop.last) if loop is not None else (n, n - 1)
    runs = _runs(loop)
    events = []
    time = 0.0
    # Before the loop: the top-level bundles (whatever primes the loop's copies).
    for b in range(0, min(first, n)):
        top = schedule.innermost[b] is None
        for _ in range(2 if top else 0):
            for instruction in schedule.code[b]:
                machine.run(instruction, None)
        for instruction in schedule.code[b]:
            if top and instruction.opcode.startswith("dma.") and not instruction.opcode.startswith("dma.done.") \
                    or top and instruction.opcode == "dma.done.wait":
                event = next((e for e in schedule.dma if e.bundle == b and not e.pipeline), None)
                if event is not None:
                    events.append((-1, time, "wait" if instruction.opcode == "dma.done.wait" else "start",
                                   machine.flag(instruction), _bytes_of(instruction, values)))
        time += schedule.weight[b]
    if loop is None:
        return events
    skips = _forward_skips(schedule, loop)   # the bundles its forward branches may skip
    for trip in range(trips_played):
        snapshot = dict(machine.env)
        b = first
        while b <= last:
            region = schedule.innermost[b]
            nested = _nested_loop(loop, region)
            if nested is not None and b == nested.first and _plays_in_full(nested):
                # A loop nested in this one (a copy loop in the grid loop's body): where the
                # branches around it are known to let it run this trip, its trips run one after
                # another and the copies it starts join the events, so a wait in this loop is
                # matched with the copies it waits for (started in this trip or an earlier one)
                # rather than taken to wait for a copy started just before it. Where a branch
                # skips it this trip, it starts nothing; where a branch cannot be decided, it is
                # run once as before and its copies are not counted (never a copy that may not run).
                runs_now = _runs_this_trip(machine, skips, b)
                if runs_now is not None:
                    if runs_now:
                        time = _play_nested(schedule, machine, nested, trip, time, _runs(loop), events)
                    else:
                        time += sum(schedule.weight[x] for x in range(nested.first, nested.last + 1)) / runs
                    b = nested.last + 1
                    continue
            _run_bundle(schedule, machine, b, region, loop if trip > 0 else None, snapshot)
            for instruction in schedule.code[b]:
                if region is loop and instruction.opcode.startswith("dma.") and \
                        (instruction.opcode == "dma.done.wait" or not instruction.opcode.startswith("dma.done")):
                    if machine.guard(instruction) is False:
                        continue  # predicated off in this trip (a first trip's wait, a last trip's start)
                    if _runs_this_trip(machine, skips, b) is False:
                        continue  # a branch skips it this trip (a grid pipeline's first and last trips)
                    kind = "wait" if instruction.opcode == "dma.done.wait" else "start"
                    if not any(e.bundle == b and not e.pipeline and e.kind == kind for e in schedule.dma):
                        continue  # the grid pipeline's, priced per step by the caller: its flag is not needed
                    flag = machine.flag(instruction)
                    if flag is None:
                        return None
                    events.append((trip, time, kind, flag, _bytes_of(instruction, values)))
            time += schedule.weight[b] / runs
            b += 1
    return events


# A loop nested in the played one is run trip by trip (_play_nested) only up to this many bundles
# a trip of the played loop; past it, its bundles run once as before and its copies are not seen.
NESTED_PLAY_BUNDLES = 20_000


def _nested_loop(loop: Region, region: Region | None) -> Region | None:
    """The outermost loop inside `loop` (under its predicated regions too) that holds `region`;
    None when `region` is `loop` or not inside it."""
    found = None
    while region is not None and region is not loop:
        if region.is_loop:
            found = region
        region = region.parent
    return found if region is loop else None


def _plays_in_full(nested: Region) -> bool:
    if not nested.trips:
        return False
    return nested.trips * (nested.last - nested.first + 1) <= NESTED_PLAY_BUNDLES


def _run_bundle(schedule: Schedule, machine: "_Machine", b: int, region: Region | None,
                looping: Region | None, snapshot: dict) -> None:
    """Runs bundle b's scalar instructions: its phis first (the value from the previous trip where
    `looping` is the bundle's own loop, else the value from before the loop), then the others
    twice (SSA names are unique, so a second pass settles values defined in the same bundle)."""
    values = schedule.values
    for instruction in schedule.code[b]:
        if instruction.opcode == "sphi" and region is not None:
            init, back = _phi_operands(values, instruction, region)
            if region is looping:
                phi = snapshot.get(back) if back else None
            else:
                phi = machine.operand(init) if init else None
            machine.run(instruction, phi)
    for _ in range(2):
        for instruction in schedule.code[b]:
            if instruction.opcode != "sphi":
                machine.run(instruction)


def _forward_skips(schedule: Schedule, loop: Region) -> "_RangeConditions | None":
    """The bundles of `loop` that its forward branches may skip (`sbr.rel (%p) target = $regionN`
    ahead: the bundles in between run where the branch is not taken), as _RangeConditions; a
    branch back (to this loop's head, or to a nested loop's, whose closing bundle the dump may
    mark as this loop's) skips nothing. None where a target cannot be found."""
    start_of: dict = {}
    for b, labels in enumerate(schedule.labels):
        for label in labels:
            start_of.setdefault(label, b)
    ranges = []
    for b in range(loop.first, loop.last + 1):
        if schedule.innermost[b] is not loop:
            continue
        for instruction in schedule.code[b]:
            match = _BRANCH.search(instruction.raw)
            if not match or match.group(3) in loop.labels:
                continue
            target = start_of.get(match.group(3))
            if target is None:
                return None
            if target > b:
                ranges.append((b + 1, target, match.group(2), match.group(1) != "!"))
    return _RangeConditions(ranges)


def _runs_this_trip(machine: "_Machine", skips, bundle: int) -> bool | None:
    """Whether `bundle` runs in the trip being played, by the forward branches that may skip it
    (_loop_blocks' conditions: it runs where each predicate != its `negated`): True, False, or
    None where a predicate is not known (or the branches could not be read)."""
    if skips is None:
        return None
    for predicate, negated in skips.get(bundle, []):
        value = machine.operand(predicate)
        if not isinstance(value, bool):
            return None
        if value == negated:
            return False
    return True


def _play_nested(schedule: Schedule, machine: "_Machine", nested: Region, trip: int, time: float,
                 outer_runs: float, events: list) -> float:
    """Plays every trip of `nested` (a loop inside the played loop, in its trip `trip`), adding
    the copies it starts to `events`; returns the time after it. Only a start known to run is
    added: one whose predicate holds (or that has none), outside any branch of the loop that may
    skip it unless the branch is known not to; and whose flag is known. Its own waits are priced
    with its own loop (manual_dma_stall_cycles)."""
    values = schedule.values
    per_trip = outer_runs * nested.trips
    skips = _forward_skips(schedule, nested)
    for inner in range(nested.trips):
        snapshot = dict(machine.env)
        for b in range(nested.first, nested.last + 1):
            region = schedule.innermost[b]
            _run_bundle(schedule, machine, b, region, nested if inner > 0 else None, snapshot)
            if region is nested and _runs_this_trip(machine, skips, b):
                for instruction in schedule.code[b]:
                    if not instruction.opcode.startswith("dma.") or instruction.opcode.startswith("dma.done"):
                        continue
                    predicated = bool(instruction.operands and _GUARD.search(instruction.operands[0]))
                    if predicated and machine.guard(instruction) is not True:
                        continue
                    flag = machine.flag(instruction)
                    if flag is None or not any(e.bundle == b and not e.pipeline and e.kind == "start"
                                               for e in schedule.dma):
                        continue
                    events.append((trip, time, "start", flag, _bytes_of(instruction, values)))
            time += schedule.weight[b] / per_trip
    return time


def _bytes_of(instruction: Instruction, values: _Values) -> float:
    if instruction.opcode == "dma.done.wait":
        ops = [o for o in instruction.operands if not o.startswith("(")]
        granules = values.constant(ops[-1]) if ops else None
    else:
        match = _SIZE.search(instruction.raw)
        granules = values.constant(match.group(1)) if match else None
    return float((granules or 0) * GRANULE_BYTES)


def _stalls_by_trip(events, latency_cycles: float, bytes_per_cycle: float) -> dict:
    """Plays the events in order: each wait consumes the oldest outstanding start on its exact
    flag (and the next ones, while their bytes fall short of the wait's) and stalls until that
    copy is done; a stall delays everything after it. A copy's bytes
    start to move a latency after its start, and copies in flight share the chip's bandwidth: each
    one's bytes move after those of the copies started before it (one queue), so a copy split into
    pieces started together is done when the whole would have been, while the latencies of copies
    in flight overlap."""
    outstanding: dict = {}
    delay = 0.0
    stalls: dict = {}
    channel_free = float("-inf")  # when the bytes of the copies started so far have all moved
    for trip, time, kind, flag, size in events:
        now = time + delay
        if kind == "start":
            channel_free = max(now + latency_cycles, channel_free) + size / bytes_per_cycle
            outstanding.setdefault(flag, []).append((now, size, channel_free))
            continue
        queue = outstanding.get(flag)
        issued, started_size, done = queue.pop(0) if queue else (now, size, now)
        # A wait for more bytes than that copy moves (one wait for a buffer filled by many copies
        # signalling one flag: a page table's pages) consumes the next ones too, until its bytes
        # are covered, and lasts until the last of them is done.
        while started_size < size and queue:
            _, more, more_done = queue.pop(0)
            started_size += more
            done = max(done, more_done)
        done = max(done, issued + latency_cycles + max(size, started_size) / bytes_per_cycle)
        stall = max(0.0, done - now)
        delay += stall
        stalls[trip] = stalls.get(trip, 0.0) + stall
    return stalls


def manual_dma_stall_cycles(schedule: Schedule, latency_cycles: float, bytes_per_cycle: float) -> float:
    """Cycles the kernel's own DMA waits stall for, over the whole schedule.

    A copy is done `latency + bytes / bandwidth` after its start; its wait stalls until then. The
    schedule's scalar code is run (`_Machine`) to learn the sync flag, slot included, that each
    start signals and each wait consumes: the bundles before a loop once, then its first trips in
    order (a bundle a cycle, a nested loop at its executed bundles, every stall delaying what
    follows). A wait consumes the oldest outstanding start on its flag, so a copy started a trip
    ahead (double buffering, emit_pipeline) is covered by a trip's bundles, and one awaited right
    after its start covers nothing. The steady state (the mean of the last two trips played) is
    paid for every trip. Where a flag cannot be computed, the wait is taken to consume the last
    start on its allocation before it in the same trip (or, with none before it, the last one of
    the previous trip): priming a flag before the loop earns nothing then. Waits of the grid
    pipeline are priced per grid step by the caller."""
    manual = [e for e in schedule.dma if not e.pipeline]
    waits = [e for e in manual if e.kind == "wait"]
    total = 0.0
    groups: dict = {}
    for w in waits:
        groups.setdefault(id(schedule.innermost[w.bundle]), (schedule.innermost[w.bundle], []))[1].append(w)
    for loop, group in groups.values():
        trips = (loop.trips or 1) if loop is not None else 1
        played = min(trips, 6)
        events = _play(schedule, loop, played)
        if events is not None and loop is not None:
            stalls = _stalls_by_trip(events, latency_cycles, bytes_per_cycle)
            tail = [stalls.get(t, 0.0) for t in range(max(0, played - 2), played)]
            # The first trips as played; the others at the steady state.
            total += (sum(stalls.get(t, 0.0) for t in range(played)) + (trips - played) * sum(tail) / len(tail)) \
                * (_runs(loop) / trips)
            continue
        if events is not None and loop is None:
            total += _stalls_by_trip(events, latency_cycles, bytes_per_cycle).get(-1, 0.0)
            continue
        total += _nearest_start_stalls(schedule, loop, group, latency_cycles, bytes_per_cycle)
    return total


def _nearest_start_stalls(schedule, loop, group, latency_cycles, bytes_per_cycle) -> float:
    """The conservative matching, for waits whose flags could not be computed."""
    starts = [e for e in schedule.dma if e.kind == "start" and not e.pipeline]
    n = len(schedule.weight)
    first, last = (loop.first, loop.last) if loop is not None else (0, n - 1)
    runs = _runs(loop)
    trip = sum(schedule.weight[b] for b in range(first, last + 1)) / runs
    total = 0.0
    for wait in group:
        same = [s for s in starts if s.flag is not None and wait.flag is not None and s.flag[0] == wait.flag[0]
                and first <= s.bundle <= last]
        before = [s for s in same if s.bundle < wait.bundle]
        if before:
            cover = sum(schedule.weight[b] for b in range(before[-1].bundle + 1, wait.bundle)) / runs
        elif same and loop is not None:
            cover = trip - sum(schedule.weight[b] for b in range(wait.bundle, same[-1].bundle + 1)) / runs
        else:
            cover = 0.0
        size = max([wait.bytes] + [s.bytes for s in (before[-1:] or same[-1:])])
        total += max(0.0, latency_cycles + size / bytes_per_cycle - max(0.0, cover)) * schedule.weight[wait.bundle]
    return total
