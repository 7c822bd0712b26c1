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


def check(source: str) -> list[Finding]:
    """Everything wrong with `source`, in line order; empty when it may run."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        return [Finding(1, 0, f"the source is {len(source.encode())} bytes; the limit is {MAX_SOURCE_BYTES}")]
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        return [Finding(e.lineno or 1, (e.offset or 1) - 1, f"syntax error: {e.msg}")]
    findings: list[Finding] = []

    def add(node, message):
        findings.append(Finding(getattr(node, "lineno", 1), getattr(node, "col_offset", 0), message))

    module_aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _module_allowed(alias.name):
                    add(node, f"import of `{alias.name}` is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
                module_aliases.add(alias.asname or alias.name.split(".")[0])
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
                elif alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRIBUTES:
                    add(node, f"`{full}` is not allowed")
                else:
                    module_aliases.add(alias.asname or alias.name)
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
                    changed = True
    # Assigning into an imported module (jax.numpy.dot = ..., time.perf_counter = ...) patches the
    # judge's view of it.
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            inner = {id(n.value) for n in ast.walk(target) if isinstance(n, ast.Attribute)}
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and id(sub) not in inner:
                    root = sub
                    while isinstance(root, ast.Attribute):
                        root = root.value
                    if isinstance(root, ast.Name) and root.id in module_aliases:
                        add(sub, f"assigning to `{ast.unparse(sub)}` patches a module; not allowed")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "kernel" for n in tree.body):
        findings.append(Finding(1, 0, "the candidate defines no top-level function `kernel(*inputs)`"))
    findings.sort(key=lambda f: (f.line, f.column))
    return findings
