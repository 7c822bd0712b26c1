"""The candidate's source, read before any of it runs: what it may import and touch.

A first filter, nothing more. A Pallas candidate is Python, and Python code can reach everything
in its interpreter by routes no list of names closes (string evaluation inside library functions,
attribute chains through allowed modules, pickles). So the verdict does not rest here: the
candidate runs only in the tracer, which holds no task data, and everything it hands over is
checked, compiled and run by the judge, a process that never imports candidate code
(docs/pallas.md, "Who holds what"). This check turns the known routes into a clear `rejected`
before any of that, and costs milliseconds.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import types

# Modules a kernel needs; their submodules too, except the private and the judge-facing ones.
ALLOWED_MODULES = ("jax", "jax.numpy", "jax.lax", "jax.nn", "jax.experimental.pallas",
                   "jax.experimental.pallas.tpu", "functools", "math", "numpy", "typing",
                   "dataclasses", "itertools")
FORBIDDEN_NAMES = {"__import__", "exec", "eval", "compile", "open", "globals", "locals", "vars",
                   "getattr", "setattr", "delattr", "breakpoint", "input", "memoryview",
                   "__builtins__", "__loader__", "__spec__"}
# Attributes that lead to the judge, the clock or native code: jax's profiler/config and host
# callbacks, and every door to machine code from Python (numpy's ctypes helpers, jax's FFI). Native
# code in the worker could forge the worker's own report (a TPU time, a verdict), which nothing
# outside the process could tell apart: so it is refused here, and seccomp stops what it would
# do to the machine.
FORBIDDEN_ATTRIBUTES = {"profiler", "config", "monitoring", "compilation_cache", "host_callback",
                        "pure_callback", "io_callback", "callback", "ctypes", "ctypeslib", "load_library",
                        "ffi", "extend", "memmap", "tofile", "fromfile",
                        # allowed modules' own imports: typing.sys, dataclasses.inspect, typing.operator
                        "sys", "modules", "inspect", "operator", "builtins", "os", "pathlib", "shutil",
                        "importlib", "pickle", "marshal", "copyreg",
                        # library functions that evaluate strings or take attribute names as strings
                        "get_type_hints", "ForwardRef", "attrgetter", "methodcaller",
                        # frames: the caller's locals are the worker's
                        "currentframe", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
                        "gi_frame", "cr_frame", "ag_frame", "tb_frame",
                        # numpy's readers and writers of arbitrary bytes
                        "fromregex", "loadtxt", "genfromtxt", "savetxt", "DataSource"}
# numpy.load(allow_pickle=True) runs whatever function the pickle names.
FORBIDDEN_KEYWORDS = {"allow_pickle"}
# Readers and writers of files and bytes, under any module (jax.numpy re-exports numpy's): a
# loader's dangerous parameter can be passed by position (np.load(f, None, True) is
# allow_pickle=True), so the loader itself is what is refused, not a keyword.
FORBIDDEN_ATTRIBUTES |= {"load", "loads", "save", "savez", "savez_compressed", "fromstring", "open_memmap",
                         "read_array", "write_array", "recfromcsv", "recfromtxt", "DataSource"}
# Of the modules whose names are not all a kernel's business, the attributes a kernel may use:
# everything else (numpy's f2py, whose Fortran parser evaluates text with a bare eval; numpy.lib's
# file formats; jax's export, profiler and interpreters; typing's own imports) is refused by
# default, so a route no one has listed yet is closed too. The packages in _OPEN_PACKAGES (jax.numpy,
# jax.lax, jax.nn, Pallas) are a kernel's vocabulary: only FORBIDDEN_ATTRIBUTES applies to them.
ATTRIBUTE_ALLOWLIST = {
    "jax": {"numpy", "lax", "nn", "experimental", "ShapeDtypeStruct", "Array", "jit", "vmap", "named_scope",
            "dtypes", "tree_util", "tree", "random", "eval_shape", "ensure_compile_time_eval", "checkpoint",
            "remat", "custom_jvp", "custom_vjp", "named_call", "typeof"},
    "jax.experimental": {"pallas"},
    "numpy": {
        # dtypes and their facts
        "float32", "float16", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
        "uint64", "bool_", "dtype", "finfo", "iinfo", "issubdtype", "result_type", "promote_types", "floating",
        "integer", "number", "ndarray", "generic",
        # numbers
        "pi", "e", "inf", "nan", "euler_gamma", "newaxis",
        # arithmetic on shapes and scalars
        "prod", "sum", "cumsum", "cumprod", "max", "min", "maximum", "minimum", "abs", "sqrt", "exp", "log", "log2",
        "log1p", "expm1", "power", "floor", "ceil", "round", "sign", "tanh", "sin", "cos", "arctan", "mean", "var",
        "clip", "where", "isfinite", "isnan", "all", "any", "gcd", "lcm", "mod", "floor_divide", "divmod",
        # small constant tables
        "array", "asarray", "arange", "linspace", "zeros", "ones", "full", "eye", "tri", "triu", "tril", "stack",
        "concatenate", "reshape", "transpose", "broadcast_to", "broadcast_shapes", "indices", "meshgrid", "outer",
        "argmax", "argmin", "argsort", "sort", "unique", "diff", "repeat", "tile", "flip", "roll", "shape", "size",
        "ndim"},
    "typing": {"Any", "Callable", "Sequence", "Tuple", "List", "Dict", "Optional", "Union", "NamedTuple",
               "Iterable", "Mapping", "Literal", "Final", "TypeVar", "Generic", "Protocol", "cast"},
    "functools": {"partial", "reduce", "wraps", "lru_cache", "cache", "cached_property", "partialmethod"},
    "itertools": {"product", "accumulate", "chain", "combinations", "permutations", "repeat", "count", "islice",
                  "zip_longest", "starmap", "pairwise", "cycle", "groupby", "takewhile", "dropwhile"},
    "dataclasses": {"dataclass", "field", "fields", "replace", "astuple", "asdict", "InitVar"},
}
_OPEN_PACKAGES = ("jax.numpy", "jax.lax", "jax.nn", "jax.experimental.pallas")  # and their submodules
MAX_SOURCE_BYTES = 256 * 1024


@dataclasses.dataclass
class Finding:
    line: int
    column: int
    message: str


def _module_allowed(name: str) -> bool:
    if any(part.startswith("_") for part in name.split(".")):
        return False
    return name in ALLOWED_MODULES or any(name.startswith(parent + ".") for parent in _OPEN_PACKAGES)


def _attribute_allowed(module: str, attr: str) -> bool:
    """Whether `module.attr` may be used: private and forbidden names never; in a module with an
    allowlist only what it lists; in the open packages and what lies below them, the rest."""
    if attr.startswith("_") or attr in FORBIDDEN_ATTRIBUTES:
        return False
    if module in ATTRIBUTE_ALLOWLIST:
        return attr in ATTRIBUTE_ALLOWLIST[module]
    if module == "math":
        return True
    return any(module == p or module.startswith(p + ".") for p in _OPEN_PACKAGES)


_MISSING = object()


def _resolve(path: str):
    """The object a dotted path of allowed names reaches in the libraries themselves (the judge has
    them imported), or _MISSING: `jax.experimental.pallas.tpu.core` is the module
    jax._src.pallas.mosaic.core, whatever its path says."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if not _module_allowed(name):
            continue
        try:
            obj = importlib.import_module(name)
        except Exception:
            continue
        for attr in parts[cut:]:
            obj = _step(obj, attr)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _step(obj, attr: str):
    """One attribute further, followed through modules and classes (a class attribute may hold a
    module too); past any other object the chain is judged by its path."""
    if not isinstance(obj, (types.ModuleType, type)):
        return _MISSING
    try:
        return getattr(obj, attr, _MISSING)
    except Exception:
        return _MISSING


def _rules_of(path: str, obj) -> str:
    """The module whose rules apply to the next attribute: the module actually reached (an
    attribute that is a module brings its own rules, not its parent's), else the path."""
    return obj.__name__ if isinstance(obj, types.ModuleType) else path


def _stored(target):
    """The attribute or subscript expressions an assignment target writes into (`m.x`, `m.x[i]`,
    each of `a, m.x = ...`), not the expressions it only reads (`ref[pl.ds(i, 8)]` reads `pl.ds`)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _stored(element)
    elif isinstance(target, ast.Starred):
        yield from _stored(target.value)
    elif isinstance(target, (ast.Attribute, ast.Subscript)):
        yield target


def check(source: str) -> list[Finding]:
    """Everything wrong with `source`, in line order; empty when it may run."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        return [Finding(1, 0, f"the source is {len(source.encode())} bytes; the limit is {MAX_SOURCE_BYTES}")]
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        return [Finding(e.lineno or 1, (e.offset or 1) - 1, f"syntax error: {e.msg}")]
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._kg_parent = parent
    findings: list[Finding] = []

    def add(node, message):
        findings.append(Finding(getattr(node, "lineno", 1), getattr(node, "col_offset", 0), message))

    module_aliases: set[str] = set()
    module_paths: dict[str, str] = {}  # a name bound to a module -> the module's dotted path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _module_allowed(alias.name):
                    add(node, f"import of `{alias.name}` is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
                module_aliases.add(alias.asname or alias.name.split(".")[0])
                module_paths[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level or not (_module_allowed(base) or
                                  all(_module_allowed(f"{base}.{a.name}") for a in node.names)):
                add(node, f"import from `{'.' * node.level}{base}` is not allowed")
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if alias.name == "*":
                    add(node, "`import *` is not allowed")
                elif alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRIBUTES or \
                        not _attribute_allowed(base, alias.name):
                    add(node, f"`{full}` is not allowed")
                else:
                    module_aliases.add(alias.asname or alias.name)
                    module_paths[alias.asname or alias.name] = full
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            add(node, f"`{node.id}` is not allowed in a kernel")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                add(node, f"dunder attribute `{node.attr}` is not allowed (reflection)")
            elif node.attr.startswith("_"):
                add(node, f"private attribute `{node.attr}` is not allowed")
            elif node.attr in FORBIDDEN_ATTRIBUTES:
                add(node, f"`.{node.attr}` is not allowed in a kernel")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            add(node, f"`{type(node).__name__.lower()}` is not allowed: a kernel keeps no state between calls")
        elif isinstance(node, ast.keyword) and node.arg in FORBIDDEN_KEYWORDS:
            add(node, f"keyword `{node.arg}` is not allowed in a kernel")
        elif isinstance(node, (ast.arg, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef)):
            annotation = node.returns if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node.annotation
            if annotation is not None and any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                                              for n in ast.walk(annotation)):
                add(annotation, "a string annotation is not allowed (typing helpers evaluate it as code)")
    # A plain name bound to a module (`m = pltpu`, `m = jax.numpy`) is that module too.
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in module_aliases and \
                        node.targets[0].id not in module_aliases:
                    module_aliases.add(node.targets[0].id)
                    if root.id in module_paths:  # its chain is then checked from the module it names
                        module_paths[node.targets[0].id] = module_paths[root.id]
                        if node.value is not root:
                            module_paths[node.targets[0].id] += "." + ast.unparse(node.value).split(".", 1)[1]
                    changed = True
    # Attribute chains from a module: each step must be an attribute a kernel may use.
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_kg_parent", None), ast.Attribute):
            chain = []
            root = node
            while isinstance(root, ast.Attribute):
                chain.append(root.attr)
                root = root.value
            if not isinstance(root, ast.Name) or root.id not in module_paths:
                continue
            # The chain is followed through the real objects: where a step reaches a module, that
            # module's rules apply (pltpu.core is jax._src.pallas.mosaic.core, and its `np` numpy).
            path = module_paths[root.id]
            obj = _resolve(path)
            for attr in reversed(chain):
                module = _rules_of(path, obj)
                if not _attribute_allowed(module, attr):
                    shown = module if module == path else f"{module} (reached as {path})"
                    add(node, f"`{module}.{attr}` is not among what a kernel may use from `{shown}`")
                    break
                obj = _step(obj, attr)
                path = f"{path}.{attr}"
    # Assigning into an imported module (jax.numpy.dot = ..., time.perf_counter = ...) patches the
    # judge's view of it.
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            for sub in _stored(target):
                root = sub
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in module_aliases:
                    add(sub, f"assigning to `{ast.unparse(sub)}` patches a module; not allowed")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "kernel" for n in tree.body):
        findings.append(Finding(1, 0, "the candidate defines no top-level function `kernel(*inputs)`"))
    findings.sort(key=lambda f: (f.line, f.column))
    return findings
