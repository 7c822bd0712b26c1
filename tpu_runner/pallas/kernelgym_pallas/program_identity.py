"""Whether the programs traced at every size set are one program: the proof that what is paid for
(the full-size program, compiled and estimated but, off a TPU, never run) is what was checked
(the small programs whose answers were compared).

The tracer hands over one ClosedJaxpr per size set. Two programs are instances of one template
when, read side by side in the same order,

* everything that is not a number is identical: primitives, how values flow between them (every
  operand names the same earlier value), dtypes, parameters such as precision, dimension numbers,
  dimension semantics, aliasing, memory spaces, the kernels' bodies and index maps;
* every number (a shape, a grid axis, a block size, a literal, an integer parameter, a loop bound)
  follows the sizes the same way at every size set: it is a constant, or a monomial
  c * prod(size_i ** e_i) of the task's named sizes (e_i in {-1, 0, 1}; for floating literals also
  +-1/2: a 1/sqrt(D) scale) whose coefficient c is the same at every size set.

The monomial of a number is identified on the checked size sets (`small`, `check`) and then must
predict the full-size program's number exactly. The checked sets of every task change every
size by its own prime-bearing ratio (x2, x3/2, x5/4, ...: tests assert it), so at most one
monomial fits the two checked values; where several would fit with different predictions for the
full size (a task whose sizes do not separate them), the number is *not proven*, never guessed.
A number no monomial explains (a block that is the whole dimension at the checked sizes and a
constant at the full size, a grid or literal that changes only at the full size) is not proven
either.

What follows from a proof: the full-size program computes what the checked template computes,
instantiated at the full sizes. What does not: anything that depends on the values of the sizes
beyond the program's text (an int32 index that overflows only at the full size; Mosaic's own
lowering at sizes it was not checked at) — docs/pallas.md, "What is not defended".

Verdicts: programs that differ in anything but numbers are `structural` differences (the judge
rejects the candidate); numbers that are not proven make the estimate untrusted (nothing is paid
for the full-size program's speed), with each such number named.
"""
from __future__ import annotations

import dataclasses
import enum
import fractions
import itertools
import math
import re
from typing import Iterator

import numpy as np

# Exponents a size may carry in a number's monomial.
INT_EXPONENTS = (-1, 0, 1, 2)  # 2: an N x N pair table (triangle multiplication), alone
FLOAT_EXPONENTS = (-1.0, -0.5, 0.0, 0.5, 1.0)
FLOAT_RTOL = 1e-5  # literals are float32: 2^-23 relative, and the scale is computed in Python
MAX_REASONS = 8

# Parameters that say where a value came from, not what the program does.
_IGNORED_PARAMS = {"name_and_src_info", "debug", "debug_info", "source_info", "metadata", "name",
                   "cost_estimate", "interpret", "ctx_mesh", "effects_barrier"}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclasses.dataclass
class Slot:
    """One number of the program, with its value at each size set."""
    path: str
    floating: bool
    values: dict  # size set -> int | float
    grid: tuple = ()  # positions of the enclosing pallas_call's grid extents


@dataclasses.dataclass
class Identity:
    """What the comparison found. `structural`: the first non-numeric difference, or "". `unproven`:
    each number that does not follow the sizes (the estimate is then not trusted)."""
    structural: str = ""
    unproven: list = dataclasses.field(default_factory=list)
    slots: int = 0  # numbers compared
    varying: int = 0  # of them, numbers that change with the sizes
    facts: dict = dataclasses.field(default_factory=dict)  # size set -> decision_coverage.Facts

    @property
    def proven(self) -> bool:
        return not self.structural and not self.unproven


class _Tokens:
    """A program read as a flat sequence: ("s", path, value) for everything compared exactly,
    ("n", path, number, floating, grid) for numbers, where `grid` holds the positions of the
    enclosing pallas_call's grid extents (a kernel's `k == num_programs(2) - 1` reaches the
    program as a literal: Pallas folds a static grid's extents)."""

    def __init__(self):
        self.items: list[tuple] = []
        self.grids: list[list[int]] = []  # per enclosing pallas_call, its grid extents' positions

    def struct(self, path: str, value) -> None:
        self.items.append(("s", path, value))

    def number(self, path: str, value, floating: bool) -> None:
        grid = tuple(self.grids[-1]) if self.grids else ()
        if self.grids and re.search(r"\.grid_mapping\.grid\[\d+\]$", path):
            self.grids[-1].append(len(self.items))
        self.items.append(("n", path, value, floating, grid))


def tokens(closed_jaxpr) -> list[tuple]:
    out = _Tokens()
    _closed(closed_jaxpr, "program", out)
    return out.items


def _closed(closed_jaxpr, path: str, out: _Tokens) -> None:
    consts = list(getattr(closed_jaxpr, "consts", ()))
    out.struct(f"{path}.consts", len(consts))
    for k, const in enumerate(consts):
        _array_value(const, f"{path}.const[{k}]", out)
    _jaxpr(closed_jaxpr.jaxpr, path, out)


def _jaxpr(jaxpr, path: str, out: _Tokens) -> None:
    ids: dict[int, int] = {}

    def define(var, where: str) -> None:
        ids[id(var)] = len(ids)
        _aval(getattr(var, "aval", None), where, out)

    out.struct(f"{path}.arity", (len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.outvars), len(jaxpr.eqns)))
    for k, var in enumerate(jaxpr.constvars):
        define(var, f"{path}.constvar[{k}]")
    for k, var in enumerate(jaxpr.invars):
        define(var, f"{path}.invar[{k}]")
    for n, eqn in enumerate(jaxpr.eqns):
        name = eqn.primitive.name
        where = f"{path} / {_describe(eqn, n)}"
        out.struct(f"{where}.primitive", name)
        out.struct(f"{where}.operands", (len(eqn.invars), len(eqn.outvars)))
        for k, var in enumerate(eqn.invars):
            _operand(var, ids, f"{where}.operand[{k}]", out)
        if name == "pallas_call":
            out.grids.append([])
        for key in sorted(eqn.params, key=lambda k: (k != "grid_mapping", k)):  # the grid first
            if key in _IGNORED_PARAMS:
                continue
            _value(eqn.params[key], f"{where}.{key}", out, depth=0)
        if name == "pallas_call":
            out.grids.pop()
        out.struct(f"{where}.results", len(eqn.outvars))
        for k, var in enumerate(eqn.outvars):
            define(var, f"{where}.result[{k}]")
    for k, var in enumerate(jaxpr.outvars):
        _operand(var, ids, f"{path}.output[{k}]", out)


def _describe(eqn, n: int) -> str:
    name = eqn.primitive.name
    if name == "pallas_call":
        info = eqn.params.get("name_and_src_info")
        kernel = getattr(info, "name", None) or ""
        return f"pallas_call '{kernel}' (operation {n + 1})" if kernel else f"pallas_call (operation {n + 1})"
    return f"{name} (operation {n + 1})"


def _operand(var, ids: dict, path: str, out: _Tokens) -> None:
    if type(var).__name__ == "Literal":
        aval = getattr(var, "aval", None)
        out.struct(f"{path}.literal_dtype", str(getattr(aval, "dtype", type(var.val).__name__)))
        _array_value(var.val, f"{path}.literal", out)
    else:
        out.struct(path, ("var", ids.get(id(var), -1)))


def _aval(aval, path: str, out: _Tokens) -> None:
    if aval is None:
        out.struct(path, None)
        return
    inner = getattr(aval, "inner_aval", None)
    out.struct(f"{path}.kind", type(aval).__name__)
    if inner is not None and inner is not aval:
        out.struct(f"{path}.memory_space", _plain(getattr(aval, "memory_space", None)))
        _aval(inner, f"{path}.inner", out)
        return
    out.struct(f"{path}.dtype", str(getattr(aval, "dtype", None)))
    out.struct(f"{path}.weak_type", bool(getattr(aval, "weak_type", False)))
    shape = getattr(aval, "shape", None)
    if shape is None:
        return
    out.struct(f"{path}.rank", len(shape))
    for k, d in enumerate(shape):
        _number(d, f"{path}.shape[{k}]", out)


def _array_value(value, path: str, out: _Tokens) -> None:
    """A constant or literal: a scalar is a number; an array is compared byte for byte (its
    shape as numbers), since its elements could not be matched to the sizes one by one."""
    array = np.asarray(value)
    if array.ndim == 0:
        _number(array.item(), path, out)
        return
    out.struct(f"{path}.dtype", str(array.dtype))
    out.struct(f"{path}.rank", array.ndim)
    for k, d in enumerate(array.shape):
        _number(int(d), f"{path}.shape[{k}]", out)
    out.struct(f"{path}.bytes", ("array", array.tobytes()))


def _number(value, path: str, out: _Tokens) -> None:
    if isinstance(value, (bool, np.bool_)):
        out.struct(path, bool(value))
    elif isinstance(value, (int, np.integer)):
        out.number(path, int(value), False)
    elif isinstance(value, (float, np.floating)):
        out.number(path, float(value), True)
    elif isinstance(value, complex):
        out.struct(path, value)
    else:
        _value(value, path, out, depth=0)


def _plain(value) -> str:
    return _ADDRESS.sub("", repr(value))


def _value(value, path: str, out: _Tokens, depth: int) -> None:
    if depth > 40:
        out.struct(path, _plain(value))
        return
    if value is None or isinstance(value, (str, bytes, bool, np.bool_)):
        out.struct(path, value)
    elif isinstance(value, (int, float, np.integer, np.floating, complex)):
        _number(value, path, out)
    elif isinstance(value, enum.Enum):
        out.struct(path, f"{type(value).__name__}.{value.name}")
    elif isinstance(value, np.dtype) or type(value).__name__ in ("dtype", "DType"):
        out.struct(path, str(value))
    elif isinstance(value, type):
        out.struct(path, f"{value.__module__}.{value.__qualname__}")
    elif isinstance(value, np.ndarray):
        _array_value(value, path, out)
    elif type(value).__name__ == "PyTreeDef":
        # A state indexer's tree holds its static slices (start, size, stride) in its nodes' data.
        node = value.node_data()
        if node is None:  # a leaf
            out.struct(path, "leaf")
            return
        kind, data = node
        out.struct(f"{path}.node", f"{kind.__module__}.{kind.__qualname__}")
        _value(data, f"{path}.data", out, depth + 1)
        children = value.children()
        out.struct(f"{path}.children", len(children))
        for k, child in enumerate(children):
            _value(child, f"{path}[{k}]", out, depth + 1)
    elif hasattr(value, "jaxpr") and hasattr(value, "consts"):  # ClosedJaxpr
        _closed(value, path, out)
    elif hasattr(value, "eqns") and hasattr(value, "invars"):  # Jaxpr
        _jaxpr(value, path, out)
    elif hasattr(value, "shape") and hasattr(value, "dtype") and type(value).__name__.endswith(
            ("Array", "Ref", "Aval", "ShapedArray", "AbstractRef", "MemRef")):
        _aval(value, path, out)
    elif isinstance(value, dict):
        out.struct(f"{path}.keys", tuple(sorted(map(str, value))))
        for key in sorted(value, key=str):
            _value(value[key], f"{path}[{key}]", out, depth + 1)
    elif isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        out.struct(f"{path}.length", (type(value).__name__, len(value)))
        for k, item in enumerate(value):
            _value(item, f"{path}[{k}]", out, depth + 1)
    elif isinstance(value, (set, frozenset)):
        out.struct(path, tuple(sorted(_plain(v) for v in value)))
    elif dataclasses.is_dataclass(value) or hasattr(value, "_fields"):
        names = [f.name for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else list(value._fields)
        out.struct(f"{path}.type", type(value).__name__)
        for name in names:
            if name in _IGNORED_PARAMS:
                continue
            _value(getattr(value, name), f"{path}.{name}", out, depth + 1)
    elif callable(value):
        # A function as a parameter (differentiation rules, kept as refusing placeholders by the
        # judge's reader): it never runs in the judged program; compared by its kind only.
        out.struct(path, ("callable", type(value).__name__))
    else:
        fields = getattr(value, "__dict__", None)
        if fields:
            out.struct(f"{path}.type", type(value).__name__)
            for name in sorted(fields):
                if name.startswith("_") or name in _IGNORED_PARAMS:
                    continue
                _value(fields[name], f"{path}.{name}", out, depth + 1)
        else:
            out.struct(path, _plain(value))


def compare(programs: dict, sizes: dict, fit_sets=("small", "check"), target: str = "full") -> Identity:
    """Whether `programs[target]` is the template of `programs[fit_sets]` instantiated at the target's
    sizes. `sizes`: size set -> {size name: value}."""
    names = list(fit_sets) + [target]
    streams = {name: tokens(programs[name]) for name in names}
    identity = Identity()
    first = streams[names[0]]
    for name in names[1:]:
        kind, message = _difference(first, streams[name], names[0], name)
        if kind == "structural":
            identity.structural = message
            return identity
        if kind == "repeats":
            identity.unproven.append(message)
            return identity
    slots = {}
    for position, item in enumerate(first):
        if item[0] == "n":
            slots[position] = Slot(item[1], any(streams[n][position][3] for n in names),
                                   {n: streams[n][position][2] for n in names}, item[4])
    identity.slots = len(slots)
    fitter = _Fitter(sizes, fit_sets, target)
    for slot in slots.values():
        values = list(slot.values.values())
        if all(_same(v, values[0], slot.floating) for v in values):
            continue
        identity.varying += 1
        problem = fitter.problem(slot, [slots[g] for g in slot.grid])
        if not problem:
            continue
        _add_reason(identity, problem)
    # What the program computes from its numbers before it touches data (decision_coverage.py).
    from . import decision_coverage
    try:
        from . import layout_cuts
        sources = {name: layout_cuts.operand_sources(programs[name]) for name in (*fit_sets, target)}
        problems = decision_coverage.check(programs, fit_sets, target, fitter, identity.facts, sources)
    except Exception as error:  # a program the evaluator cannot follow is not shown to decide alike
        problems = [f"the program's decisions could not be evaluated ({type(error).__name__}: {str(error)[:200]})"]
    for problem in problems:
        _add_reason(identity, problem)
    return identity


def _add_reason(identity: Identity, problem: str) -> None:
    if len(identity.unproven) < MAX_REASONS:
        identity.unproven.append(problem)
    elif not identity.unproven[-1].endswith("(and more)"):
        identity.unproven[-1] += " (and more)"


def _same(a, b, floating: bool) -> bool:
    if floating:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= FLOAT_RTOL * max(abs(a), abs(b))
    return a == b


# Tokens that count parts (equations, operands, elements of a list): where these differ the
# programs repeat a step a different number of times (a Python loop unrolled by a count that
# follows the sizes) and cannot be read side by side.
_COUNTS = (".arity", ".length", ".results", ".children", ".keys", ".consts", ".rank", ".operands")


def _difference(a: list, b: list, name_a: str, name_b: str) -> tuple[str, str]:
    """(kind, message): kind "structural" (the same places hold different things), "repeats" (the
    programs repeat a step a different number of times) or "" (none)."""
    repeats = (f"the programs traced at the {name_a} and {name_b} sizes repeat a step a different number of times "
               f"(a Python loop unrolled by a count that follows the sizes?); the repeat count at the full size "
               f"cannot be checked: use lax.fori_loop or a grid axis")
    for x, y in zip(a, b):
        if x[0] != y[0] or x[1] != y[1]:  # counts come before what they count: not a repeat
            return "structural", (f"the programs traced at the {name_a} and {name_b} sizes differ at {x[1]}: "
                                  f"{_show(x[2])} in one, {_show(y[2]) if y[1] == x[1] else y[1]} in the other")
        if x[0] == "s" and x[2] != y[2]:
            if x[1].endswith(".bytes"):  # a constant array computed outside the program (numpy)
                return "repeats", (f"{x[1]}: a constant array whose values change with the sizes; its values at the "
                                   f"full size cannot be checked against the checked ones (compute it in the program, "
                                   f"from iotas, instead)")
            if x[1].endswith(_COUNTS):
                return "repeats", f"{repeats} (they part at {x[1]}: {_show(x[2])} and {_show(y[2])})"
            return "structural", f"{x[1]} is {_show(x[2])} at the {name_a} sizes and {_show(y[2])} at the {name_b} sizes"
    if len(a) != len(b):
        return "repeats", repeats
    return "", ""


def _show(value) -> str:
    if isinstance(value, tuple) and value and value[0] == "array":
        return "an array constant"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


MAX_SIZES_PER_READING = 3


def _exponent_vectors(count: int, exponents, square_alone: bool) -> np.ndarray:
    """Every exponent vector over `count` sizes with at most MAX_SIZES_PER_READING nonzero entries."""
    nonzero = [e for e in exponents if e != 0]
    rows = [np.zeros(count)]
    for k in range(1, min(count, MAX_SIZES_PER_READING) + 1):
        for positions in itertools.combinations(range(count), k):
            for values in itertools.product(nonzero, repeat=k):
                if square_alone and k > 1 and 2 in values:
                    continue
                row = np.zeros(count)
                row[list(positions)] = values
                rows.append(row)
    return np.array(rows, float).reshape(-1, count)


class _Fitter:
    """The readings of a number that fit the checked sets, and what each says of the full size.

    A reading is a monomial c * prod(size_i ** e_i) or, inside a kernel, one of its grid's extents
    minus one. Monomials are found in log space (log|v| = log|c| + sum(e_i log size_i): the
    exponents whose sum matches the number's log-ratio between the checked sets) and confirmed
    exactly (integers as fractions). A number is proven when it has a reading and every reading
    gives the full-size value; several readings that disagree at the full size prove nothing."""

    def __init__(self, sizes: dict, fit_sets, target: str):
        self.fit_sets = list(fit_sets)
        self.target = target
        every = self.fit_sets + [target]
        # Only sizes known at every set can carry an exponent.
        self.names = sorted(n for n in set().union(*(sizes[s].keys() for s in every))
                            if all(n in sizes[s] for s in every))
        self.sizes = {s: [int(sizes[s][n]) for n in self.names] for s in every}
        # At most MAX_SIZES_PER_READING sizes in one monomial (a task may name ten sizes: every
        # combination of every exponent would be millions of readings, and more coincidences), and
        # a square only alone (N*N, a pair table).
        self._exponents = {False: _exponent_vectors(len(self.names), INT_EXPONENTS, square_alone=True),
                           True: _exponent_vectors(len(self.names), FLOAT_EXPONENTS, square_alone=False)}
        logs = {s: np.log(np.array(self.sizes[s], float)) for s in every}
        self._shift = {s: logs[s] - logs[self.fit_sets[0]] for s in every}
        self._cache: dict = {}

    def problem(self, slot: Slot, grid: list) -> str:
        key = (slot.floating, tuple(slot.values.items()), tuple(tuple(g.values.items()) for g in grid))
        if key not in self._cache:
            self._cache[key] = self._problem(slot, grid)
        message = self._cache[key]
        return f"{slot.path}: {message}" if message else ""

    def _problem(self, slot: Slot, grid: list) -> str:
        shown = ", ".join(f"{v:g}" if slot.floating else str(v) for v in slot.values.values())
        sets = "/".join(slot.values)
        actual = slot.values[self.target]
        readings = self._readings(slot, grid)
        if not readings:
            return (f"{shown} at the {sets} sizes: no constant multiple of the sizes' powers gives it at both checked "
                    f"sizes, so the full-size value is not known to follow from the checked ones")
        if all(self._close(prediction, actual, slot.floating) for prediction, _ in readings):
            return ""
        if len({self._key(p, slot.floating) for p, _ in readings}) > 1:
            return (f"{shown} at the {sets} sizes: the checked sizes do not tell how it follows the sizes "
                    f"({' or '.join(d for _, d in readings[:3])}; the task's checked sizes do not separate "
                    f"{', '.join(self.names)})")
        prediction, description = readings[0]
        return (f"{shown} at the {sets} sizes: the checked sizes give {description}, which is "
                f"{self._show(prediction, slot.floating)} at the {self.target} sizes, not {actual}")

    def _readings(self, slot: Slot, grid: list) -> list:
        """(full-size prediction, description) of the readings that fit the checked sets, from the
        first kind of reading that has any, in a fixed order: a literal in a kernel that is a grid
        extent minus one (the last step's test) is read so; else the monomials; else, for an
        integer, the monomials minus one (the last index of a dimension, a count of blocks minus
        one); else a size plus a constant margin (a padded dimension). The order depends on the checked values only, never on the full-size one, so a
        program cannot choose the reading that suits it at the full size."""
        if not slot.floating and slot.path.endswith(".literal"):  # a literal in a kernel's body
            steps = [(extent.values[self.target] - 1, f"the grid's extent {k} minus one") for k, extent in enumerate(grid)
                     if all(slot.values[s] == extent.values[s] - 1 for s in self.fit_sets)]
            if steps:
                return steps
        readings = self._monomials(slot)
        if readings or slot.floating:
            return readings
        shifted = Slot(slot.path, False, {k: v + 1 for k, v in slot.values.items()})
        readings = [(prediction - 1, f"{formula} minus one") for prediction, formula in self._monomials(shifted)]
        if readings:
            return readings
        # Last, a size plus a constant: a dimension padded by a fixed margin (a halo, one more block).
        first = self.fit_sets[0]
        padded = []
        for k, name in enumerate(self.names):
            margin = slot.values[first] - self.sizes[first][k]
            if all(slot.values[s] - self.sizes[s][k] == margin for s in self.fit_sets[1:]):
                padded.append((self.sizes[self.target][k] + margin, f"{name} {'+' if margin >= 0 else '-'} {abs(margin)}"))
        return padded

    def _monomials(self, slot: Slot) -> list:
        """(full-size prediction, formula) for every monomial that gives the number at the checked sets."""
        base = slot.values[self.fit_sets[0]]
        if base == 0 or any(slot.values[s] == 0 or (slot.values[s] > 0) != (base > 0) for s in self.fit_sets[1:]):
            return []
        exponents = self._exponents[slot.floating]
        mask = np.ones(len(exponents), bool)
        for s in self.fit_sets[1:]:
            ratio = math.log(abs(slot.values[s])) - math.log(abs(base))
            mask &= np.abs(exponents @ self._shift[s] - ratio) <= 1e-6
        out = []
        for row in exponents[mask][:256]:
            if slot.floating:
                coefficient = base / self._monomial(row, self.fit_sets[0], True)
            else:
                coefficient = fractions.Fraction(base) / self._monomial(row, self.fit_sets[0], False)
            if not all(self._close(coefficient * self._monomial(row, s, slot.floating), slot.values[s], slot.floating)
                       for s in self.fit_sets[1:]):
                continue
            prediction = coefficient * self._monomial(row, self.target, slot.floating)
            if not slot.floating and prediction.denominator != 1:
                continue  # an integer cannot follow a reading that is fractional at the full size
            out.append((prediction, self._formula(coefficient, row, slot.floating)))
        return out

    def _monomial(self, exponents, size_set: str, floating: bool):
        if floating:
            return math.prod(float(d) ** float(e) for d, e in zip(self.sizes[size_set], exponents))
        value = fractions.Fraction(1)
        for d, e in zip(self.sizes[size_set], exponents):
            value *= fractions.Fraction(d) ** int(e)
        return value

    @staticmethod
    def _close(predicted, actual, floating: bool) -> bool:
        if floating:
            return _same(float(predicted), float(actual), True)
        return predicted == actual

    @staticmethod
    def _key(value, floating: bool):
        return round(float(value), 6) if floating else value

    @staticmethod
    def _show(value, floating: bool) -> str:
        if floating:
            return f"{float(value):g}"
        value = fractions.Fraction(value)
        return str(value.numerator) if value.denominator == 1 else f"{float(value):g} (not an integer)"

    def _formula(self, coefficient, exponents, floating: bool) -> str:
        terms = [name if e == 1 else f"{name}^{e:g}" for name, e in zip(self.names, exponents) if e != 0]
        c = f"{float(coefficient):g}" if floating else str(coefficient)
        return f"{c}*{'*'.join(terms)}" if terms else f"the constant {c}"


def iter_reasons(identity: Identity) -> Iterator[str]:
    if identity.structural:
        yield identity.structural
    yield from identity.unproven

