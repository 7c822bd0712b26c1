#!/usr/bin/env python3
"""Fails when a C++ file includes a module its layer may not use (docs/layers.md), when code
outside a backend compares a backend's name instead of reading its descriptor, or when a file
outside a backend's folder names it at all (a quoted name in code, comments aside).

The table below is the architecture, bottom first. Each module names the modules it may include
from, and may name only modules above it in the table, so the graph it allows has no cycle. A
file belongs to the longest module path that prefixes it. Tests, benchmarks and fuzzers may
include anything and are not checked.

Run: python3 scripts/check_layers.py [REPO]      (ctest: layers.IncludesPointDownward)
"""
import json
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
)
NAME_CHECKED_TREES = ("core", "datasets", "env", "rewards", "tpu_runner", "policies", "cli", "python/kernelgym")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)

# A backend's identity lives in its own folder (tpu_runner/<name>/: its descriptor.json, its
# task loader's rules, its code); no file elsewhere names it. Exceptions, each with its reason:
# the default backend (the descriptor first in order) is every `backend` option's default and a
# suite's name; the others may be named only by the files below.
BACKEND_NAMERS = {
    "tpu_runner/builtin_backends.cc": "the one file that registers every built-in backend",
    "python/kernelgym/text.py": "the client package's offline copy of the descriptors, replaced by hello's",
    "python/kernelgym/examples/": "examples pick a backend as a user does",
}
SERVER_OWN = {  # the backend the server answers itself (evaluated_by_server)
    "core/result.cc": "NullBackendResult: what the server's own backend answers",
    "core/result_json.cc": "JSON's null, not the backend",
    "env/server/requests.cc": "the server answers its own backend's steps",
    "python/kernelgym/adapters/verifiers.py": "the verifiers library's own harness id 'null', not the backend",
}
COMMENT = {".py": re.compile(r"#.*$"), "cc": re.compile(r"//.*$")}


def backend_descriptors(repo: pathlib.Path) -> list[dict]:
    """The backends' own descriptors (tpu_runner/<name>/descriptor.json), in their order."""
    out = []
    for file in sorted(repo.glob("tpu_runner/*/descriptor.json")):
        descriptor = json.loads(file.read_text())
        descriptor["folder"] = file.parent.relative_to(repo).as_posix()
        out.append(descriptor)
    return sorted(out, key=lambda d: d.get("order", 0))


def check_backend_names(repo: pathlib.Path) -> list[str]:
    """Files outside a backend's folder that name it (a quoted name in code)."""
    descriptors = backend_descriptors(repo)
    if not descriptors:
        return []
    default = descriptors[0]["name"]
    problems = []
    for descriptor in descriptors[1:]:
        name, folder = descriptor["name"], descriptor["folder"]
        quoted = re.compile(r"""(?<![\w.-])["']%s["']""" % re.escape(name))
        allowed = dict(BACKEND_NAMERS, **(SERVER_OWN if descriptor.get("evaluated_by_server") else {}))
        for tree in NAME_CHECKED_TREES:
            for file in sorted((repo / tree).rglob("*")):
                if file.suffix not in CHECKED_SUFFIXES | {".py"} or not file.is_file():
                    continue
                rel = file.relative_to(repo).as_posix()
                if rel.startswith(folder + "/") or rel.startswith(tuple(allowed)):
                    continue
                comment = COMMENT[".py" if file.suffix == ".py" else "cc"]
                for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                    if quoted.search(comment.sub("", line)):
                        problems.append(f"{rel}:{number}: names the {name} backend outside {folder}/ (read its "
                                        f"descriptor; only the default backend, {default}, may be named "
                                        f"elsewhere): {line.strip()}")
    return problems


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
    problems += check_backend_names(repo)
    for problem in problems:
        print(problem)
    print(f"{checked} files checked against {len(LAYERS)} modules: "
          f"{'ok' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
