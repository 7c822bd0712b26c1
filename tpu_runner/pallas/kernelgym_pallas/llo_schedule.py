"""One compiled op's final schedule (libtpu's `final_bundles` dump), read as the chip runs it: its
loops with their trip counts, and the DMAs it issues and waits for.

A line of the dump is one VLIW bundle: `0x1f LB: >> { %a = op ... ;; %b = op ... }`. Each `>` is a
region the bundle sits in (a loop, or a predicated region), `LB:` marks where a loop body starts.
The schedule is in SSA form with physical registers (`%s142_s28`), loop-carried values join in
`sphi`, and constants are printed as unsigned 32-bit numbers (4294967232 is -64).

Trip counts are read from a loop's own data flow, never from one constant: the exit test
(`scmp.<cc>.s32 %counter, N`, commented `loop exit test`, or else the predicate of the branch that
closes the loop), the counter's step (`%counter = sadd.s32 S, %phi`), and its start
(`%phi = sphi %init, %copy-of-counter`, `%init = smov K`). A loop from -4 to 0 is 4 trips; one from
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
_SIZE = re.compile(r"/\*size_in_granules=\*/\s*(%\w+|\d+)")
_SYNC_FLAG = re.compile(r"/\*dst_syncflagno=\*/\s*(\[[^\]]*\]|%\w+)")
_ALLOCATION = re.compile(r"\[\s*#(allocation\d+)\s*(?:\+\s*\$?(0x[0-9a-f]+|\d+))?\s*\]")
_SCMP = re.compile(r"^scmp\.(eq|ne|lt|le|gt|ge)\.s32")
_IMMEDIATE = re.compile(r"^-?\d+$")


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

    @property
    def unknown_trips(self) -> int:
        return sum(1 for _, trips, _ in self.loops if trips is None)

    @property
    def unknown_dma_sizes(self) -> int:
        return sum(1 for e in self.dma if e.granules is None)

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

    def add(self, instruction: Instruction) -> None:
        if instruction.name:
            # A name defined twice is not SSA: neither definition can be trusted.
            self.defs[instruction.name] = None if instruction.name in self.defs else instruction

    def copy_source(self, name: str, limit: int = 16) -> str:
        """`name` followed back through register copies (`smov %x`)."""
        for _ in range(limit):
            d = self.defs.get(name)
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
        if d is not None and d.opcode == "smov" and len(d.operands) == 1 and _IMMEDIATE.match(d.operands[0]):
            return _signed(int(d.operands[0]))
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
    return _trips_until(cc, starts[0], step, bound)


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
        return DmaEvent(index, "wait", values.constant(operands[-1]), _flag(values, operands[-2]), pipeline)
    if instruction.opcode.startswith("dma.done"):
        return None
    size, flag = _SIZE.search(instruction.raw), _SYNC_FLAG.search(instruction.raw)
    granules = values.constant(size.group(1)) if size else None
    return DmaEvent(index, "start", granules, _flag(values, flag.group(1)) if flag else None, pipeline)


def parse_schedule(text: str) -> Schedule:
    lines = []
    for line in text.splitlines():
        match = _BUNDLE.match(line)
        if match:
            lines.append(match.groups())
    values = _Values()
    parsed = []
    for marker, arrows, body in lines:
        instructions = [] if body.strip().startswith("}") else _split(body)
        for instruction in instructions:
            values.add(instruction)
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
            counts = {trip_count(values, p, exits) for p, exits in candidates}
            region.trips = counts.pop() if len(counts) == 1 else None
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
    return Schedule(bundles=len(parsed), executed=top.own + sum(c.executed_per_entry for c in top.children),
                    by_depth=by_depth, loops=[(r.depth, r.trips, r.own) for r in loops], dma_bundles=dma_bundles,
                    dma=dma, weight=weight, innermost=innermost)


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


def manual_dma_stall_cycles(schedule: Schedule, latency_cycles: float, bytes_per_cycle: float) -> float:
    """Cycles the kernel's own DMA waits stall for, over the whole schedule.

    A copy is done `latency + bytes / bandwidth` after its start; its wait stalls until then. One
    trip of each loop that holds waits is played in order (a bundle a cycle, each nested loop at
    its executed bundles, every stall delaying what follows), and repeated until the trip's length
    settles, since a copy started a trip ago (double buffering) had one trip to run. The start a
    wait consumes has the same sync flag: when the flag was started before the loop more often
    than waited (primed), the last one in the body a trip earlier; otherwise the last one before
    the wait in this trip, or, with none before it, the last one in the previous trip. A start
    inside a nested loop counts from that loop's end; a wait with no start it can match stalls
    for the whole copy. Waits of the grid pipeline are priced per grid step by the caller."""
    manual = [e for e in schedule.dma if not e.pipeline]
    waits = [e for e in manual if e.kind == "wait"]
    starts = [e for e in manual if e.kind == "start"]
    n = len(schedule.weight)
    total = 0.0
    groups: dict = {}
    for w in waits:
        groups.setdefault(id(schedule.innermost[w.bundle]), (schedule.innermost[w.bundle], []))[1].append(w)
    for loop, group in groups.values():
        first, last = (loop.first, loop.last) if loop is not None else (0, n - 1)
        runs = _runs(loop)
        base = [0.0] * (last - first + 2)
        for b in range(first, last + 1):
            base[b - first + 1] = base[b - first] + schedule.weight[b] / runs
        trip = base[-1]

        def position(event):
            child = _child_of(loop, schedule.innermost[event.bundle])
            if child is None and loop is not None and event.bundle < first:
                return None
            return child.last if child is not None and child.is_loop else event.bundle

        def primed(flag):
            before = [e for e in manual if e.bundle < first and _same_flag(e.flag, flag)] if loop is not None else []
            return sum(1 if e.kind == "start" else -1 for e in before) > 0

        previous = trip
        history = []
        for _ in range(12):
            stalled, paid = 0.0, []   # paid: (bundle, stall) in this trip, in order

            def time_at(bundle):
                return base[bundle - first] + sum(st for b, st in paid if b < bundle)

            for w in group:
                now = time_at(w.bundle)
                matching = [(position(s), s) for s in starts if _same_flag(s.flag, w.flag)]
                inside = sorted((p, s) for p, s in matching if p is not None and first <= p <= last)
                earlier = [(p, s) for p, s in inside if p < w.bundle]
                if inside and loop is not None and (primed(w.flag) or not earlier):
                    p, s = inside[-1]
                    issued = time_at(p) - previous
                elif earlier:
                    p, s = earlier[-1]
                    issued = time_at(p)
                else:
                    s, issued = None, now
                size = w.bytes if s is None else max(w.bytes, s.bytes)
                stall = max(0.0, issued + latency_cycles + size / bytes_per_cycle - now)
                paid.append((w.bundle, stall))
                stalled += stall
            history.append(stalled)
            if loop is None or abs(trip + stalled - previous) < 0.5:
                break
            previous = trip + stalled
        # A copy started before its wait, a trip ahead, alternates: a trip that stalls lets the
        # next one find its copy done. The mean of the last two trips is the steady state.
        total += sum(history[-2:]) / len(history[-2:]) * runs
    return total
