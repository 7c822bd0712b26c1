"""How many times each computation of an optimized HLO module runs, from its while loops' static
trip counts.

A final schedule (and libtpu's static profile) holds a while loop's body once, and XLA's cost model
on TPU counts it once too: the TPU's HLO carries no `known_trip_count`. `lax.map`, `lax.scan` and
`fori_loop` with constant bounds lower to one canonical loop, which is read here:

    init:      tuple(..., copy(constant(K)), ...)               element i of the loop state
    condition: ROOT compare(get-tuple-element(param, index=i), constant(N)), direction=LT
    body:      ROOT tuple(..., add(get-tuple-element(param, index=i), constant(1)), ...)

giving N - K trips. Anything else (another step, a bound that is not a constant, a loop reached
through a conditional or a call) has no count here: the caller keeps such work counted once and
says so. A wrong count would misprice the work, so the pattern is matched exactly, never guessed.
"""

from __future__ import annotations

import dataclasses
import re

_COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"^([\w\-]+)\((.*)$")
_ATTRIBUTE = re.compile(r"\b(condition|body|index|direction)=%?([\w.\-]+)")


@dataclasses.dataclass
class _Instruction:
    opcode: str
    operands: list[str]
    attributes: dict[str, str]
    constant: int | None  # the value of an integer scalar constant


@dataclasses.dataclass
class _Computation:
    instructions: dict[str, _Instruction] = dataclasses.field(default_factory=dict)
    root: str = ""


@dataclasses.dataclass
class ModuleLoops:
    entry: str
    computation_of: dict[str, str]       # instruction name -> the computation it is in
    runs: dict[str, int | None]          # computation -> times it runs per call of the module (None: unknown)
    loop_bodies: frozenset = frozenset()  # the computations that are a while loop's body

    def in_uncounted_loop(self, name: str) -> bool:
        """The instruction is in a while loop's body (or below one) whose trip count is unknown."""
        computation = self.computation_of.get(name)
        return computation is not None and self.runs.get(computation) is None and computation in self.loop_bodies

    def runs_of_instruction(self, name: str) -> int | None:
        """How many times the instruction runs; None when it is unknown (or the name is not in the module)."""
        computation = self.computation_of.get(name)
        return self.runs.get(computation) if computation is not None else None


def _operands(text: str) -> list[str]:
    """The operand names of `op(%a, %b), attr=...`: up to the parenthesis that closes the list."""
    depth, end = 1, len(text)
    for i, ch in enumerate(text):
        depth += ch in "({["
        depth -= ch in ")}]"
        if depth == 0:
            end = i
            break
    names = []
    for part in text[:end].split(","):
        part = part.strip()
        if part.startswith("%"):
            names.append(part[1:])
        elif part and " %" in part:  # older text: `f32[] %name`
            names.append(part.rsplit("%", 1)[1])
    return names


operand_names = _operands


def split_shape(rest: str) -> tuple[str, str]:
    """An instruction's right-hand side as (its result shape, what follows): a tuple's `(...)`
    (its layouts hold parentheses too) or one array type, up to the first space."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[:i + 1], rest[i + 1:].lstrip()
        return rest, ""
    shape, _, after = rest.partition(" ")
    return shape, after.lstrip()


def _parse(hlo_text: str) -> tuple[dict[str, _Computation], str]:
    computations: dict[str, _Computation] = {}
    current, entry = None, ""
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head and " = " not in line.split("(", 1)[0]:
            current = computations.setdefault(head.group(2), _Computation())
            if head.group(1):
                entry = head.group(2)
            continue
        match = _INSTRUCTION.match(line) if current is not None else None
        if not match:
            continue
        is_root, name, rest = match.groups()
        op = _OPCODE.match(split_shape(rest)[1])
        if not op:
            continue
        opcode, tail = op.groups()
        constant = None
        if opcode == "constant":
            value = tail.split(")", 1)[0].strip()
            constant = int(value) if re.fullmatch(r"-?\d+", value) else None
        attributes = dict(_ATTRIBUTE.findall(tail))
        current.instructions[name] = _Instruction(opcode, [] if opcode == "constant" else _operands(tail),
                                                  attributes, constant)
        if is_root:
            current.root = name
    return computations, entry


def _through_copies(computation: _Computation, name: str) -> _Instruction | None:
    instruction = computation.instructions.get(name)
    while instruction is not None and instruction.opcode == "copy" and len(instruction.operands) == 1:
        instruction = computation.instructions.get(instruction.operands[0])
    return instruction


def _state_index(computation: _Computation, name: str) -> str | None:
    """`get-tuple-element(param, index=i)` -> "i", for the computation's parameter; through copies
    (XLA copies the counter into another memory space before stepping it: 11p's loop over 128
    experts, `add(copy(get-tuple-element(param, 0)), 1)`, had no count before)."""
    instruction = _through_copies(computation, name)
    if instruction is None or instruction.opcode != "get-tuple-element" or len(instruction.operands) != 1:
        return None
    source = computation.instructions.get(instruction.operands[0])
    return instruction.attributes.get("index") if source is not None and source.opcode == "parameter" else None


def _constant(computation: _Computation, name: str) -> int | None:
    instruction = _through_copies(computation, name)
    return instruction.constant if instruction is not None and instruction.opcode == "constant" else None


def _trip_count(parent: _Computation, loop: _Instruction, condition: _Computation, body: _Computation) -> int | None:
    test = condition.instructions.get(condition.root)
    if test is None or test.opcode != "compare" or len(test.operands) != 2:
        return None
    direction = test.attributes.get("direction")
    if direction == "LT":
        counter, bound = test.operands
    elif direction == "GT":
        bound, counter = test.operands
    else:
        return None
    index, limit = _state_index(condition, counter), _constant(condition, bound)
    if index is None or limit is None or len(loop.operands) != 1:
        return None
    init = parent.instructions.get(loop.operands[0])
    if init is None or init.opcode != "tuple" or int(index) >= len(init.operands):
        return None
    start = _constant(parent, init.operands[int(index)])
    next_state = body.instructions.get(body.root)
    if start is None or next_state is None or next_state.opcode != "tuple" or int(index) >= len(next_state.operands):
        return None
    step = body.instructions.get(next_state.operands[int(index)])
    if step is None or step.opcode != "add" or len(step.operands) != 2:
        return None
    a, b = step.operands
    if not ((_state_index(body, a) == index and _constant(body, b) == 1) or
            (_state_index(body, b) == index and _constant(body, a) == 1)):
        return None
    return max(0, limit - start)


def module_loops(hlo_text: str) -> ModuleLoops:
    """Each computation's runs per call of the module: 1 for ENTRY, a loop body's trips times its
    parent's runs; None for a computation reached any other way or through a loop without a
    static count (fused computations are not listed: their fusion is the scheduled op)."""
    computations, entry = _parse(hlo_text)
    parent_of: dict[str, tuple[str, int | None]] = {}
    for parent_name, parent in computations.items():
        for instruction in parent.instructions.values():
            if instruction.opcode != "while":
                continue
            condition = computations.get(instruction.attributes.get("condition", ""))
            body_name = instruction.attributes.get("body", "")
            body = computations.get(body_name)
            trips = _trip_count(parent, instruction, condition, body) if condition and body else None
            # A body run by two loops has no single count.
            parent_of[body_name] = (parent_name, trips) if body_name not in parent_of else (parent_name, None)
            parent_of.setdefault(instruction.attributes.get("condition", ""), (parent_name, None))

    runs: dict[str, int | None] = {}

    def runs_of(name: str, depth: int = 0) -> int | None:
        if name in runs:
            return runs[name]
        if name == entry:
            result = 1
        elif name in parent_of and depth < 64:
            parent, trips = parent_of[name]
            outer = runs_of(parent, depth + 1)
            result = outer * trips if outer is not None and trips is not None else None
        else:
            result = None
        runs[name] = result
        return result

    computation_of = {}
    for name, computation in computations.items():
        runs_of(name)
        for instruction in computation.instructions:
            computation_of[instruction] = name
    return ModuleLoops(entry, computation_of, runs, frozenset(parent_of))
