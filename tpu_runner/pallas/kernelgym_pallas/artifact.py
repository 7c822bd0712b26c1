"""The traced program that crosses from the tracer (untrusted: it ran the candidate's Python) to
the judge (trusted: it never imports candidate code): one ClosedJaxpr per size set, pickled.

Why a jaxpr and not jax.export's StableHLO: the judge has to do three things with the program it
is given, and with nothing else. It checks its structure (a `pallas_call`, no heavy XLA work
outside one), compiles it for the TPU (Pallas -> Mosaic -> libtpu) and runs it in Pallas TPU
interpret mode to compare its answers. An exported TPU program holds each kernel as an opaque
Mosaic custom call that only a TPU can run, and interpret mode cannot be exported at all (it is
made of host callbacks): measured with the installed jax, docs/pallas.md. A jaxpr keeps the
`pallas_call` and its kernel body, from which the judge itself lowers both the TPU compile and the
interpreter, so what is checked, compiled and run is one object.

Loading a pickle runs the constructors it names, so the judge's unpickler admits an explicit list
of classes and factory functions (`_ALLOWED`), nothing callable beyond them: no builtins, no
`getattr`, no function of the candidate's. Primitives travel by name and come back as the judge's
own objects (`_primitive`), and only those the judge can run without calling into Python (no
callbacks, no FFI). Functions inside the program that jax keeps only for differentiation
(custom_jvp rules) become `Opaque` placeholders that refuse to run. Source locations travel as
the candidate line of each equation (diagnostics only; nothing judged depends on them).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import io
import pickle
import sys
import types

import numpy as np

MAX_BYTES = 256 << 20  # a program with its constants; the tracer's file is refused past this
_PROTOCOL = 5
_ACCEPTED_ROOTS = ("jax", "jaxlib", "numpy", "ml_dtypes")
# Modules whose primitives call back into Python or native code by name: never in a program the
# judge runs.
_REFUSED_PRIMITIVE_MODULES = ("jax._src.callback", "jax._src.debugging", "jax._src.ffi",
                              "jax._src.lax.control_flow.for_loop_callbacks")
_REFUSED_PRIMITIVES = {"pure_callback", "io_callback", "debug_callback", "ffi_call", "callback",
                       "custom_call", "python_callback"}


class ArtifactError(Exception):
    """The tracer's file is not a program the judge accepts; the message says what was refused."""


class Opaque:
    """A function the tracer could not send (a custom_jvp rule, a lambda): jax keeps it for
    transformations the judge never applies. Calling it is refused."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise ArtifactError(f"the program needs the function `{self.name}`, which does not cross to the judge")

    def __repr__(self):
        return f"Opaque({self.name})"


# ---- the primitive table (both sides build it from the same jax) -------------------------------

def _primitives() -> tuple[dict, dict]:
    """(id(primitive) -> key, key -> primitive) for every Primitive object defined at module level
    in jax's modules loaded now; key = "module:attribute". Rebuilt when modules were loaded since
    (a candidate may import a jax module the warm-up did not)."""
    loaded = len(sys.modules)
    if _TABLE.get("modules") != loaded:
        _TABLE.update(modules=loaded, table=_scan_primitives())
    return _TABLE["table"]


_TABLE: dict = {}


def _scan_primitives() -> tuple[dict, dict]:
    from jax._src import core
    by_id, by_key = {}, {}
    for name in sorted(sys.modules):
        if not (name == "jax" or name.startswith("jax.") or name.startswith("jaxlib")):
            continue
        module = sys.modules[name]
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if isinstance(value, core.Primitive) and id(value) not in by_id:
                key = f"{name}:{attr}"
                by_id[id(value)] = key
                if not name.startswith(_REFUSED_PRIMITIVE_MODULES) and value.name not in _REFUSED_PRIMITIVES:
                    by_key[key] = value
    return by_id, by_key


def _ensure_modules() -> None:
    """The modules whose primitives a Pallas program may hold, imported on both sides so both
    tables agree."""
    import jax  # noqa: F401
    import jax.numpy  # noqa: F401
    from jax.experimental import pallas  # noqa: F401
    from jax.experimental.pallas import tpu  # noqa: F401


# ---- factories the judge's unpickler admits ----------------------------------------------------

def _primitive(key: str):
    _, by_key = _primitives()
    if key not in by_key:
        raise ArtifactError(f"the program uses the primitive `{key.split(':')[-1]}`, which the judge does not run")
    return by_key[key]


def _enum_member(module: str, qualname: str, member: str):
    cls = _class_at(module, qualname)
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        raise ArtifactError(f"{module}.{qualname} is not an enum")
    return cls[member]


def _class_at(module: str, qualname: str):
    if not module.split(".")[0] in _ACCEPTED_ROOTS or module not in sys.modules:
        raise ArtifactError(f"no enum from {module}")
    value = sys.modules[module]
    for part in qualname.split("."):
        if part.startswith("__"):
            raise ArtifactError(f"{qualname}: not a class path")
        value = vars(value).get(part) if isinstance(value, types.ModuleType) else value.__dict__.get(part)
        if value is None:
            raise ArtifactError(f"{module}.{qualname}: not found")
    return value


def _source_info(line: int):
    from jax._src import source_info_util
    info = _LineSourceInfo(None, source_info_util.NameStack())
    info.candidate_line = int(line)
    return info


def candidate_line(source_info) -> int:
    """The candidate line the tracer gave for an equation, 0 if none."""
    return getattr(source_info, "candidate_line", 0) or 0


def _debug_info(traced_for, func_src_info, arg_names, result_paths):
    from jax._src import linear_util
    strings = lambda v: v if v is None or (isinstance(v, tuple) and all(isinstance(s, str) for s in v)) else None
    return linear_util.DebugInfo(str(traced_for), str(func_src_info), strings(arg_names), strings(result_paths))


def _typed_ndarray(value, weak_type):
    from jax._src import core, literals
    value = np.asarray(value)
    return literals.TypedNdArray(value, core.ShapedArray(value.shape, value.dtype, weak_type=bool(weak_type)))


def _opaque(name):
    return Opaque(str(name))


def _array(value):
    return np.asarray(value)


_LineSourceInfo = None  # set by _line_source_info_class() once jax is imported


def _line_source_info_class():
    global _LineSourceInfo
    if _LineSourceInfo is None:
        from jax._src import source_info_util

        class LineSourceInfo(source_info_util.SourceInfo):
            __slots__ = ("candidate_line",)

        _LineSourceInfo = LineSourceInfo
    return _LineSourceInfo


_FACTORIES = {f.__name__: f for f in (_primitive, _enum_member, _source_info, _debug_info, _typed_ndarray,
                                      _opaque, _array)}

# What the judge's unpickler may name: the classes a Pallas program's jaxpr is made of (seen in
# every bundled task's starter and the adversarial cases, plus their siblings a kernel is likely
# to use), the numpy and ml_dtypes reconstructors, and the factories above. A class not here
# makes the program `rejected` with its name: widen this list, never `find_class`.
_ALLOWED = {
    "jax._src.core": {"ClosedJaxpr", "Jaxpr", "JaxprEqn", "JaxprEqnContext", "Literal", "Var", "DropVar",
                      "ShapedArray", "ManualAxisType", "MemorySpace"},
    "jax._src.literals": {"TypedInt", "TypedFloat", "TypedComplex"},
    "jax._src.linear_util": {"WrappedFun"},
    "jax._src.mesh": {"AbstractMesh", "Mesh", "AxisType"},
    "jax._src.named_sharding": {"UnspecifiedValue", "_unpickle_named_sharding", "NamedSharding"},
    "jax._src.partition_spec": {"PartitionSpec", "UnconstrainedSingleton", "_get_default_unconstrained"},
    "jax": {"P"},
    "jax._src.tree_util": {"default_registry", "tracing_registry", "none_leaf_registry"},
    "jaxlib._jax.pytree": {"PyTreeDef"},
    "jaxlib._jax": {"PyTreeDef"},
    "jax._src.indexing": {"Slice"},
    "jax._src.state.indexing": {"NDIndexer", "Slice"},
    # A ref's bitcast, reshape and transpose (their jax 0.9 names, and jax 0.10's).
    "jax._src.state.types": {"AbstractRef", "ReadEffect", "WriteEffect", "AccumEffect", "TransformedRef",
                             "RefBitcaster", "RefReshaper", "RefTransposer",
                             "BitcastTransform", "ReshapeTransform", "TransposeTransform"},
    "jax._src.pallas.core": {"GridMapping", "BlockMapping", "Blocked", "Element", "Squeezed", "BoundedSlice",
                             "Buffered", "CostEstimate", "MemoryRef", "MemorySpace", "NameAndSrcInfo"},
    "jax._src.pallas.mosaic.core": {"DMASemaphore", "Semaphore", "BarrierSemaphore", "SemaphoreType",
                                    "MemorySpace", "CompilerParams", "GridDimensionSemantics", "KernelType",
                                    "AbstractSemaphore", "AbstractSemaphoreTyRules"},
    "jax._src.pallas.primitives": set(),
    "jax._src.lax.slicing": {"GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode"},
    "jax._src.lax.lax": {"Precision", "DotAlgorithm", "DotAlgorithmPreset", "RoundingMethod"},
    "jax._src.lax.convolution": {"ConvDimensionNumbers"},
    "numpy": {"dtype", "ndarray", "bool_", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
              "uint8", "uint16", "uint32", "uint64", "complex64", "complex128"},
    "numpy.dtypes": {"Float16DType", "Float32DType", "Float64DType", "Int8DType", "Int16DType", "Int32DType",
                     "Int64DType", "UInt8DType", "UInt16DType", "UInt32DType", "UInt64DType", "BoolDType",
                     "Complex64DType", "Complex128DType"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.numeric": {"_frombuffer"},
    "ml_dtypes": {"bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4"},
    __name__: set(_FACTORIES),
}


# ---- writing (the tracer) ----------------------------------------------------------------------

class _Writer(pickle.Pickler):
    def __init__(self, file, candidate_file: str):
        super().__init__(file, protocol=_PROTOCOL)
        self._candidate_file = candidate_file
        self._own = set(_FACTORIES.values())

    def reducer_override(self, obj):  # noqa: C901 (one dispatch on type)
        from jax._src import core, linear_util, literals, source_info_util
        import jax
        from jax._src.pallas import core as pallas_core
        if isinstance(obj, pallas_core.DynamicGridDim):  # said here: the reader would only name the class
            raise ArtifactError("a grid whose size is computed from the data at run time (a `DynamicGridDim`, as jax's "
                                "megablox gmm has) is not supported: off a TPU its steps can be neither priced nor "
                                "shown to cover the output; give the grid a size that follows the task's shapes")
        if isinstance(obj, core.Primitive):
            by_id, _ = _primitives()
            key = by_id.get(id(obj))
            if key is None:
                raise ArtifactError(f"the primitive `{obj.name}` is not one of jax's")
            return (_primitive, (key,))
        if isinstance(obj, source_info_util.SourceInfo):
            line = 0
            for frame in source_info_util.user_frames(obj.traceback):
                if frame.file_name == self._candidate_file:
                    line = frame.start_line
                    break
            return (_source_info, (line,))
        if isinstance(obj, linear_util.DebugInfo):
            paths = obj.result_paths if isinstance(obj.result_paths, tuple) else None
            return (_debug_info, (obj.traced_for, obj.func_src_info, obj.arg_names, paths))
        if isinstance(obj, literals.TypedNdArray):
            return (_typed_ndarray, (np.array(obj), bool(obj.aval.weak_type)))
        if isinstance(obj, enum.Enum):
            return (_enum_member, (type(obj).__module__, type(obj).__qualname__, obj.name))
        if isinstance(obj, jax.Array):
            return (_array, (np.asarray(obj),))
        if isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                            types.BuiltinMethodType, functools.partial)) and obj not in self._own:
            module = getattr(obj, "__module__", None) or ""
            qualname = getattr(obj, "__qualname__", "") or ""
            if module.split(".")[0] in _ACCEPTED_ROOTS and "<" not in qualname and \
                    qualname in _ALLOWED.get(module, ()):
                return NotImplemented  # by reference; the judge admits it by name
            return (_opaque, (f"{module}.{qualname}",))
        return NotImplemented


def dump(programs: dict, candidate_file: str) -> bytes:
    """Pickles {size set: ClosedJaxpr}. Raises ArtifactError (or pickle's own errors) for a
    program that cannot travel."""
    _ensure_modules()
    _line_source_info_class()
    out = io.BytesIO()
    _Writer(out, candidate_file).dump({"programs": dict(programs)})
    return out.getvalue()


# ---- reading (the judge) -----------------------------------------------------------------------

class _Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if name not in _ALLOWED.get(module, ()):
            raise ArtifactError(f"the program holds `{module}.{name}`, which the judge does not rebuild")
        if module == __name__:
            return _FACTORIES[name]
        return super().find_class(module, name)

    def persistent_load(self, pid):
        raise ArtifactError("persistent ids are not accepted")


def load(data: bytes) -> dict:
    """{size set: ClosedJaxpr} from the tracer's bytes; ArtifactError for anything refused."""
    from jax._src import core
    _ensure_modules()
    _line_source_info_class()
    if len(data) > MAX_BYTES:
        raise ArtifactError(f"the traced program is {len(data)} bytes; the limit is {MAX_BYTES}")
    try:
        loaded = _Reader(io.BytesIO(data)).load()
    except ArtifactError:
        raise
    except Exception as error:  # a malformed stream, a constructor refusing its arguments
        raise ArtifactError(f"the traced program could not be read: {type(error).__name__}: {str(error)[:200]}")
    programs = loaded.get("programs") if isinstance(loaded, dict) else None
    if not isinstance(programs, dict) or not all(isinstance(k, str) and isinstance(v, core.ClosedJaxpr)
                                                 for k, v in programs.items()):
        raise ArtifactError("the traced program is not a set of jaxprs")
    for name, closed in programs.items():
        for const in closed.consts:
            if getattr(np.asarray(const), "dtype", np.dtype(object)).hasobject:
                raise ArtifactError(f"size set {name}: a constant of Python objects")
    return programs
