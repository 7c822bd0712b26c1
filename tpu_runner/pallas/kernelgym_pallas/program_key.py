"""The canonical key of a traced program: what the runner's cache of candidate compiles is keyed by
(tpu_runner/pallas/candidate_compile_cache.h). Two programs get the same key only when everything
the deviceless TPU compile and the estimate read of them is the same: the same primitives, wired
the same way, with the same parameters, literals, constants, avals and inner programs (kernel
bodies, index maps, branches), written out whole.

Why not the tracer's pickle: it is not canonical (jaxpr effect sets are written in hash order, and
those hashes are addresses), so the same source traced twice gives different bytes. Why not the
printed jaxpr (`str(closed_jaxpr)`): it leaves out what a compile depends on. A pallas_call's
GridMapping prints its block shapes but not its index maps, a constant prints as a name and not
its bytes, a parameter object prints its own repr (an address, or an abbreviation).

So the key is written here from the program's objects, one type at a time, every value tagged
with its kind and every sequence with its length, so no two different programs can write the same
bytes. Anything this writer does not know how to write in full (an object of a module outside
jax/numpy, a function that is not a refusing placeholder, a nesting too deep) makes the program
uncacheable: it is compiled afresh, which is always right. What is deliberately left out, because
no compile or estimate reads it: each equation's source location (the judge rebuilds it as a
candidate line number, for diagnostics only; a failed compile is never cached) and of a jaxpr's
debug_info all but its function's name (Mosaic names a kernel after it; the file, line and
argument names are read only by error messages).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import struct
import types

import numpy as np

FORMAT = b"kernelgym pallas program key, format 1\n"
MAX_DEPTH = 200
_ROOTS = ("jax", "jaxlib", "numpy", "ml_dtypes")


class Uncacheable(Exception):
    """The program holds something this writer cannot write in full: compile it afresh."""


def digest(closed_jaxpr, context: dict) -> str:
    """SHA-256 (hex) of the program written canonically, with `context` (what else the cached
    facts depend on in the judge: whether the estimate was asked for, ...). Raises Uncacheable."""
    writer = _Writer()
    writer.out.update(FORMAT)
    writer.value(dict(context), 0)
    writer.closed(closed_jaxpr, 0)
    return writer.out.hexdigest()


def canonical_bytes(closed_jaxpr, context: dict) -> bytes:
    """The bytes `digest` hashes (for tests and for reading a difference)."""
    writer = _Writer(record=True)
    writer.out.update(FORMAT)
    writer.value(dict(context), 0)
    writer.closed(closed_jaxpr, 0)
    return b"".join(writer.recorded)


class _Writer:
    def __init__(self, record: bool = False, parent: "_Writer | None" = None):
        self.recorded: list[bytes] = []
        if parent is not None:  # a value's bytes on their own, for sorting or for the memo
            self.out = _Tee(None, self.recorded)
            self.primitive_keys, self.scopes, self.memo = parent.primitive_keys, parent.scopes, parent.memo
            self.core, self.literals, self.opaque = parent.core, parent.literals, parent.opaque
            return
        self.out = _Tee(hashlib.sha256(), self.recorded if record else None)
        from jax._src import core, literals
        from . import artifact
        self.core, self.literals, self.opaque = core, literals, artifact.Opaque
        self.primitive_keys = artifact._primitives()[0]
        self.scopes: list[dict] = []
        # An object's bytes by its id (the object held, so the id stays its own): a program
        # refers to the same aval or mapping many times, and its bytes do not depend on where.
        self.memo: dict[int, tuple] = {}

    # -- the framing: a tag, then a length-prefixed body ------------------------------------------
    def put(self, tag: bytes, body: bytes = b"") -> None:
        self.out.update(tag + struct.pack("<Q", len(body)) + body)

    def text(self, tag: bytes, value: str) -> None:
        self.put(tag, value.encode("utf-8", "surrogatepass"))

    # -- programs -------------------------------------------------------------------------------
    def closed(self, closed_jaxpr, depth: int) -> None:
        consts = list(closed_jaxpr.consts)
        self.put(b"C", struct.pack("<Q", len(consts)))
        for const in consts:
            self.array(const, depth + 1)
        self.jaxpr(closed_jaxpr.jaxpr, depth + 1)

    def jaxpr(self, jaxpr, depth: int) -> None:
        self.deeper(depth)
        scope: dict[int, int] = {}
        self.scopes.append(scope)
        try:
            self.put(b"J", struct.pack("<QQQQ", len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.eqns),
                                       len(jaxpr.outvars)))
            for var in jaxpr.constvars:
                self.define(var, depth)
            for var in jaxpr.invars:
                self.define(var, depth)
            for eqn in jaxpr.eqns:
                self.eqn(eqn, depth + 1)
            for var in jaxpr.outvars:
                self.operand(var, depth)
            self.value(jaxpr.effects, depth + 1)
            # Its function's name (not its file and line): Mosaic names a kernel after it.
            debug = getattr(jaxpr, "debug_info", None)
            self.value(None if debug is None else str(debug.func_name), depth + 1)
        finally:
            self.scopes.pop()

    def eqn(self, eqn, depth: int) -> None:
        key = self.primitive_keys.get(id(eqn.primitive))
        if key is None:
            raise Uncacheable(f"the primitive `{eqn.primitive.name}` is not one of jax's")
        self.text(b"P", key)
        self.put(b"I", struct.pack("<Q", len(eqn.invars)))
        for var in eqn.invars:
            self.operand(var, depth)
        self.value(dict(eqn.params), depth + 1)
        self.put(b"O", struct.pack("<Q", len(eqn.outvars)))
        for var in eqn.outvars:
            self.define(var, depth)
        self.value(eqn.effects, depth + 1)
        self.obj(eqn.ctx, depth + 1)

    def define(self, var, depth: int) -> None:
        core = self.core
        scope = self.scopes[-1]
        if isinstance(var, core.DropVar):
            self.put(b"_")
        elif type(var) is core.Var:
            if id(var) in scope:
                raise Uncacheable("a variable defined twice")
            scope[id(var)] = len(scope)
            self.put(b"V", struct.pack("<Q", scope[id(var)]))
        else:
            raise Uncacheable(f"a binder of type {type(var).__name__}")
        self.value(var.aval, depth + 1)

    def operand(self, var, depth: int) -> None:
        core = self.core
        if isinstance(var, core.Literal):
            self.put(b"L")
            self.value(var.val, depth + 1)
            self.value(var.aval, depth + 1)
            return
        if type(var) is not core.Var or id(var) not in self.scopes[-1]:
            raise Uncacheable("an operand that is not a variable defined before it")
        self.put(b"v", struct.pack("<Q", self.scopes[-1][id(var)]))

    # -- values ---------------------------------------------------------------------------------
    def array(self, value, depth: int) -> None:
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise Uncacheable("an array of Python objects")
        self.put(b"A")
        self.dtype(array.dtype)
        self.put(b"s", struct.pack(f"<{array.ndim}q", *array.shape))
        self.put(b"B", np.ascontiguousarray(array).tobytes())

    def dtype(self, dtype) -> None:
        dtype = np.dtype(dtype)
        self.text(b"d", f"{dtype.name}|{dtype.str}|{type(dtype).__module__}.{type(dtype).__qualname__}")

    def deeper(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Uncacheable("nested too deep to write")

    def value(self, value, depth: int) -> None:  # noqa: C901 (one dispatch on type)
        self.deeper(depth)
        core, literals = self.core, self.literals
        if value is None:
            self.put(b"N")
        elif isinstance(value, (literals.TypedInt, literals.TypedFloat, literals.TypedComplex)):
            # A Python number that carries its dtype (a literal's value): both are the program's.
            self.text(b"T", type(value).__name__)
            self.value(value.dtype if hasattr(value, "dtype") else None, depth + 1)
            self.value(getattr(value, "aval", None), depth + 1)
            self.value(complex(value) if isinstance(value, complex) else
                       (float(value) if isinstance(value, float) else int(value)), depth + 1)
        elif type(value) is bool:
            self.put(b"b", b"1" if value else b"0")
        elif type(value) is int:
            self.text(b"i", str(value))
        elif type(value) is float:
            self.put(b"f", struct.pack("<d", value))  # the bits: -0.0 and each NaN are their own
        elif type(value) is complex:
            self.put(b"c", struct.pack("<dd", value.real, value.imag))
        elif type(value) is str:
            self.text(b"S", value)
        elif type(value) is bytes:
            self.put(b"y", value)
        elif isinstance(value, np.dtype):
            self.dtype(value)
        elif isinstance(value, np.generic):
            self.put(b"g")
            self.dtype(value.dtype)
            self.put(b"B", value.tobytes())
        elif isinstance(value, literals.TypedNdArray):
            self.put(b"n")
            self.value(value.aval, depth + 1)
            self.array(np.asarray(value), depth + 1)
        elif isinstance(value, np.ndarray):
            self.array(value, depth + 1)
        elif isinstance(value, core.ClosedJaxpr):
            self.closed(value, depth + 1)
        elif isinstance(value, core.Jaxpr):
            self.jaxpr(value, depth + 1)
        elif isinstance(value, enum.Enum):
            cls = type(value)
            self.text(b"E", f"{cls.__module__}.{cls.__qualname__}.{value.name}")
            self.value(value.value, depth + 1)
        elif isinstance(value, type):
            self.text(b"t", f"{value.__module__}.{value.__qualname__}")
        elif isinstance(value, (tuple, list)):
            cls = type(value)
            self.text(b"Q", f"{cls.__module__}.{cls.__qualname__}")
            self.put(b"#", struct.pack("<Q", len(value)))
            for item in value:
                self.value(item, depth + 1)
        elif isinstance(value, dict):
            self.put(b"D", struct.pack("<Q", len(value)))
            for key, item in sorted(value.items(), key=lambda kv: self.alone(kv[0], depth + 1)):
                self.value(key, depth + 1)
                self.value(item, depth + 1)
        elif isinstance(value, (set, frozenset)):
            # Sorted by each element's own canonical bytes: the set's order is its hashes'.
            self.put(b"U", struct.pack("<Q", len(value)))
            for part in sorted(self.alone(item, depth + 1) for item in value):
                self.put(b"u", part)
        elif type(value).__name__ == "PyTreeDef":
            self.treedef(value, depth + 1)
        elif type(value).__name__ == "NamedSharding" and type(value).__module__.startswith("jax"):
            # A C++ object: written by what defines it (its mesh, its spec, where it lives).
            self.text(b"H", "NamedSharding")
            self.value(value.mesh, depth + 1)
            self.value(value.spec, depth + 1)
            self.value(value.memory_kind, depth + 1)
            self.value(value._logical_device_ids, depth + 1)
        elif type(value).__name__ == "Mesh" and type(value).__module__ == "jax._src.mesh":
            # Its devices are native objects: written by their ids and platform.
            self.text(b"M", "Mesh")
            self.value(tuple(value.axis_names), depth + 1)
            self.value(tuple(value.axis_types), depth + 1)
            devices = np.asarray(value.devices, dtype=object)
            self.value(devices.shape, depth + 1)
            self.value(tuple(None if d is None else (int(d.id), str(d.platform)) for d in devices.flat), depth + 1)
        else:
            self.obj(value, depth + 1)

    def alone(self, value, depth: int) -> bytes:
        """One value's canonical bytes, written on their own (to sort a set's or a dict's)."""
        inner = _Writer(parent=self)
        inner.value(value, depth)
        return b"".join(inner.recorded)

    def treedef(self, treedef, depth: int) -> None:
        self.deeper(depth)
        node = treedef.node_data()
        children = treedef.children()
        self.put(b"p", struct.pack("<QQ", treedef.num_leaves, len(children)))
        if node is None:
            self.put(b"*")
        else:
            kind, data = node
            self.value(kind, depth + 1)
            self.value(data, depth + 1)
        for child in children:
            self.treedef(child, depth + 1)

    def obj(self, value, depth: int) -> None:
        """An object of jax's (an aval, a GridMapping, a BlockSpec's mapping, a compiler parameter
        set, an effect): its type and every attribute it holds, by name."""
        self.deeper(depth)
        known = self.memo.get(id(value))
        if known is None:
            inner = _Writer(parent=self)
            inner.obj_fields(value, depth)
            known = self.memo[id(value)] = (value, b"".join(inner.recorded))
        self.out.update(known[1])

    def obj_fields(self, value, depth: int) -> None:
        if isinstance(value, self.opaque):
            # A function the judge cannot run (it refuses when called): a compile that needed it
            # failed, and failures are not cached; one that did not need it did not read it.
            self.text(b"o", value.name)
            return
        cls = type(value)
        module = cls.__module__ or ""
        if module.split(".")[0] not in _ROOTS:
            raise Uncacheable(f"an object of {module}.{cls.__qualname__}")
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            raise Uncacheable(f"a function ({getattr(value, '__qualname__', cls.__qualname__)})")
        fields = _attributes(value)
        if fields is None:
            raise Uncacheable(f"an object of {module}.{cls.__qualname__} without readable attributes")
        self.text(b"X", f"{module}.{cls.__qualname__}")
        self.put(b"#", struct.pack("<Q", len(fields)))
        for name in sorted(fields):
            self.text(b"a", name)
            self.value(fields[name], depth + 1)


class _Tee:
    def __init__(self, hasher, record):
        self.hasher, self.record = hasher, record

    def update(self, data: bytes) -> None:
        if self.hasher is not None:
            self.hasher.update(data)
        if self.record is not None:
            self.record.append(data)

    def hexdigest(self) -> str:
        return self.hasher.hexdigest()


def _attributes(value) -> dict | None:
    """Every attribute an object holds: its dataclass fields, its __dict__ and its slots. Not the
    values of its `functools.cached_property`s: they are derived from what is written, and are in
    __dict__ only once something in the process asked for them (jax's AbstractMesh caches
    `_are_all_axes_explicit_or_manual` when a program is traced inside another trace, as
    evaluation.exact_reference does: the same candidate program got another key after it)."""
    out = {}
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            out[field.name] = getattr(value, field.name)
    derived = {name for cls in type(value).__mro__ for name, attribute in vars(cls).items()
               if isinstance(attribute, functools.cached_property)}
    for name, item in getattr(value, "__dict__", {}).items():
        if name not in derived:
            out.setdefault(name, item)
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in ([slots] if isinstance(slots, str) else slots):
            if name in ("__dict__", "__weakref__") or name in out:
                continue
            try:
                out[name] = getattr(value, name)
            except AttributeError:
                out[name] = _Unset
    if not out and not dataclasses.is_dataclass(value) and not hasattr(value, "__dict__") and not any(
            cls.__dict__.get("__slots__") is not None for cls in type(value).__mro__[:-1]):
        return None  # a native object whose state Python cannot see
    return out


class _Unset:
    """A slot that holds nothing."""
