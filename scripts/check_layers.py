#!/usr/bin/env python3
"""Fails when a C++ file includes a module its layer may not use (docs/layers.md), or when code
outside a backend compares a backend's name instead of reading its descriptor.

The table below is the architecture, bottom first. Each module names the modules it may include
from, and may name only modules above it in the table, so the graph it allows has no cycle. A
file belongs to the longest module path that prefixes it. Tests, benchmarks and fuzzers may
include anything and are not checked.

Run: python3 scripts/check_layers.py [REPO]      (ctest: layers.IncludesPointDownward)
"""
import pathlib
import re
import sys

TRAJECTORY = "datasets/trajectory"
LAYERS = [
    # 0. The vocabulary: the evaluation record and its JSON form, text safety, subprocesses, digests.
    ("core", []),
    # 1. Task schema and suites; the wire forms of both protocols; CURVE keys and ZAP.
    ("datasets", ["core"]),
    ("env/protocol", ["core"]),
    ("env/security", ["core"]),
    # 2. What judges and pays: backends and their stages, rewards; the trajectory store.
    ("tpu_runner", ["core", "datasets"]),  # shared: the interface, sandbox, machine, timing statistics
    ("tpu_runner/cpu", ["core", "datasets", "tpu_runner"]),  # one folder per backend
    ("tpu_runner/cpu/harness", ["core", "datasets", "tpu_runner", "tpu_runner/cpu"]),
    ("tpu_runner/pallas", ["core", "datasets", "tpu_runner"]),
    ("tpu_runner/null", ["core", "datasets", "tpu_runner"]),
    # The one file that names every built-in backend.
    ("tpu_runner/builtin_backends.cc", ["core", "datasets", "tpu_runner", "tpu_runner/cpu", "tpu_runner/pallas",
                                        "tpu_runner/null"]),
    ("rewards", ["core"]),
    (TRAJECTORY, ["core", "datasets"]),
    # 3. Processes and sessions: the runner host, the episode, the server, the client library.
    ("tpu_runner/host", ["core", "datasets", "tpu_runner", "env/protocol", "env/security"]),
    ("env/episode", ["core", "datasets", "env/protocol", "rewards"]),
    ("env/server", ["core", "datasets", TRAJECTORY, "env/protocol", "env/security", "env/episode", "rewards"]),
    ("env/client", ["core", "env/protocol", "env/security"]),
    # 4. Policies: clients of a server, through the client library and the protocol only.
    ("policies/llm", ["core"]),
    ("policies/roles", ["core", "datasets", TRAJECTORY, "env/protocol", "policies/llm"]),
    ("policies/common", ["core", "env/protocol", "policies/llm", "policies/roles"]),
    ("policies/learned", ["core", "env/client", "env/protocol", "policies/common"]),
    ("policies/agent", ["core", TRAJECTORY, "env/client", "env/protocol", "policies/common", "policies/llm",
                        "policies/roles"]),
    ("policies/hitl", ["core", TRAJECTORY, "env/client", "env/protocol", "policies/common", "policies/llm",
                       "policies/roles"]),
    ("policies/search", ["core", "datasets", TRAJECTORY, "env/client", "env/protocol", "policies/common",
                         "policies/learned", "policies/llm", "policies/roles"]),
    ("policies/evaluate", ["core", TRAJECTORY, "env/client", "env/protocol", "policies/agent",
                           "policies/common", "policies/learned", "policies/llm", "policies/roles",
                           "policies/search"]),
    ("policies/examples", ["env/client", "env/protocol"]),
    # 5. The command line assembles everything; nothing includes it.
    ("cli", None),  # None: any module
]
CHECKED_SUFFIXES = {".h", ".cc", ".cpp", ".hpp"}

# Nothing outside a backend and its descriptor compares a backend's name: everyone else reads the
# descriptor (core/backend_info.h; hello's backend_info for the clients of a server).
BACKEND_NAMES = ("cpu", "pallas", "cuda", "null")
NAME_COMPARISON = re.compile(r'(?:[!=]=\s*"(?:%s)"|"(?:%s)"\s*[!=]=)' % ("|".join(BACKEND_NAMES), "|".join(BACKEND_NAMES)))
MAY_COMPARE_NAMES = (
    "core/backend_info.",         # the descriptors
    "tpu_runner/",                # the backends and their registry
    "datasets/variants.",         # the pallas backend's task folder loader
)
NAME_CHECKED_TREES = ("core", "datasets", "env", "rewards", "tpu_runner", "policies", "cli", "python/kernelgym")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def module_of(path: str, modules: list[str]) -> str | None:
    best = None
    for module in modules:
        if (path == module or path.startswith(module + "/")) and (best is None or len(module) > len(best)):
            best = module
    return best


def check_table() -> list[str]:
    problems, seen = [], set()
    for module, may_use in LAYERS:
        for used in may_use or []:
            if used not in seen:
                problems.append(f"layer table: {module} may use {used}, which is not below it")
        seen.add(module)
    return problems


def main() -> int:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    modules = [m for m, _ in LAYERS]
    allowed = dict(LAYERS)
    problems = check_table()
    checked = 0
    for top in sorted({m.split("/")[0] for m in modules}):
        for file in sorted((repo / top).rglob("*")):
            if file.suffix not in CHECKED_SUFFIXES or not file.is_file():
                continue
            rel = file.relative_to(repo).as_posix()
            own = module_of(rel, modules)
            if own is None:
                problems.append(f"{rel}: in no module of the layer table (scripts/check_layers.py)")
                continue
            checked += 1
            for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = module_of(match.group(1), modules)
                if target is None or target == own or allowed[own] is None:
                    continue  # a system-style or local header, or the module's own
                if target not in allowed[own]:
                    problems.append(f"{rel}:{number}: {own} includes {match.group(1)} ({target}), "
                                    f"which it may not use (it may use: {', '.join(allowed[own]) or 'nothing'})")
    for tree in NAME_CHECKED_TREES:
        for file in sorted((repo / tree).rglob("*")):
            if file.suffix not in CHECKED_SUFFIXES | {".py"} or not file.is_file():
                continue
            rel = file.relative_to(repo).as_posix()
            if rel.startswith(MAY_COMPARE_NAMES):
                continue
            for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                if NAME_COMPARISON.search(line):
                    problems.append(f"{rel}:{number}: compares a backend's name; read its descriptor "
                                    f"(core/backend_info.h) instead: {line.strip()}")
    for problem in problems:
        print(problem)
    print(f"{checked} files checked against {len(LAYERS)} modules: "
          f"{'ok' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
