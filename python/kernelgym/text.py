"""The text interface for language-model policies: prompts in, wire actions out.

``system_prompt`` states the task and the answer formats, ``observation_message`` turns an
observation into a chat message, ``parse_action`` reads a model's reply into a wire action
(docs/protocol.md, "Actions") and ``render_action`` writes an action the way the trajectory
store's SFT export does (``RenderActionText`` in datasets/trajectory/export.cc), so that exported
examples and this parser agree: ``parse_action(render_action(a)) == a`` for every kind.

The formats a reply may take, in the order ``parse_action`` looks for them:

1. A JSON action: the whole reply is one action map (``{"kind":"knobs","values":{"SIMD":1}}``,
   ``{"kind":"revert","to_step":2}``) — how the SFT export writes ``knobs`` and ``revert``. A
   ```` ```json ```` (or unlabeled) block holding one counts too, after 2 and 3.
2. SEARCH/REPLACE blocks, one or more, anywhere in the reply (also inside a code block)::

       <<<<<<< SEARCH
       lines of the current kernel, exactly
       =======
       their replacement (nothing: delete them)
       >>>>>>> REPLACE

   Each block becomes one ``{"search", "replace"}`` edit; the texts are whole lines, each ending
   in a newline.
3. A unified diff: a ```` ```diff ```` block (or any code block holding an ``@@ -a,b +c,d @@``
   hunk header), else diff lines in the open text from a ``--- ``/``+++ ``/``@@`` header on.
4. The whole kernel: the **last** code block whose language is the backend's (``cpp``, ``c++``,
   ``c``, ``cc``, ``cxx``, or none for ``cpu``; also ``cuda``/``cu`` for ``cuda``; ``python``/``py``
   or none for ``pallas``).
5. ``SUBMIT`` on a line by itself as the reply's last line (``**SUBMIT**`` and ``SUBMIT.`` too),
   when none of the above is present.

``<think>...</think>`` sections (a reasoning model's drafts) are ignored.

Anything else raises ``ActionParseError``, whose message says what was expected and what was
found; a trainer can show it to the model and go on. Line endings are normalized to ``\\n``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_ALLOWED_HEADERS",
    "ActionParseError",
    "fence_language",
    "observation_message",
    "parse_action",
    "render_action",
    "starter_message",
    "system_prompt",
    "use_backend_info",
]


class ActionParseError(ValueError):
    """A reply that holds no action in any of the documented formats, or a malformed one."""


# tpu_runner/cpu/static_check.cc, DefaultAllowedHeaders(): the runner's list is the authority (a
# header outside it fails the static check with the list in the message); this copy only words
# the prompt. A task adds to it with task.json's policy.allowed_headers.
DEFAULT_ALLOWED_HEADERS: tuple[str, ...] = (
    "cmath", "cstdint", "cstddef", "cstring", "cstdlib", "algorithm", "limits", "array",
    "vector", "numeric", "utility", "type_traits", "cfloat", "climits", "math.h", "stdint.h",
    "stddef.h", "string.h", "stdlib.h", "float.h", "limits.h", "immintrin.h", "omp.h", "cassert",
    "assert.h", "bit", "functional", "memory", "tuple", "initializer_list", "new", "span",
)  # fmt: skip

_DEFAULT_COMPILE_FLAGS = ("-O3", "-march=native", "-fopenmp")  # docs/task_format.md, compile_flags

_ACTION_KINDS = ("replace", "edit", "patch", "knobs", "revert", "submit")
_ACTION_FIELDS = {
    "replace": ("source",),
    "edit": ("edits",),
    "patch": ("diff",),
    "knobs": ("values",),
    "revert": ("to_step",),
    "submit": (),
}

# What this module knows of each backend: the language its kernels are fenced with and the tags
# a reply's block of its source may carry. The server's descriptors (hello's ``backend_info``,
# core/backend_info.cc) replace these whenever a client says hello (``use_backend_info``); the
# copies here serve text handled with no server at hand, such as an export read offline. A name
# with no descriptor is treated as C++.
_CPP_TAGS = ("cpp", "c++", "cxx", "c", "cc", "")
_BACKEND_INFO: dict[str, dict[str, Any]] = {
    "cpu": {"name": "cpu", "language": "cpp", "fence_tags": list(_CPP_TAGS)},
    "pallas": {"name": "pallas", "language": "python", "fence_tags": ["python", "py", "python3", ""]},
    "cuda": {"name": "cuda", "language": "cuda", "fence_tags": ["cuda", "cu", "cpp", "c++", ""]},
    "null": {"name": "null", "language": "cpp", "fence_tags": list(_CPP_TAGS)},
}


def use_backend_info(infos: Sequence[Mapping[str, Any]]) -> None:
    """Describe backends as a server does (its hello's ``backend_info``); the clients call this."""
    for info in infos:
        if isinstance(info, Mapping) and isinstance(info.get("name"), str):
            _BACKEND_INFO[info["name"]] = dict(info)


def _backend_info(backend: str) -> Mapping[str, Any]:
    return _BACKEND_INFO.get(backend, _BACKEND_INFO["cpu"])


def _code_languages(backend: str) -> frozenset[str]:
    return frozenset(str(tag).lower() for tag in _backend_info(backend).get("fence_tags", _CPP_TAGS))


_DIFF_LANGUAGES = frozenset({"diff", "patch", "udiff"})

_SEARCH_MARKER = re.compile(r"<{5,9} ?SEARCH")
_DIVIDER = "======="
_REPLACE_MARKER = re.compile(r">{5,9} ?REPLACE")
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)
_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_SUBMIT_LINE = re.compile(r"[*_`\s]*submit[*_`\s]*[.!]?[*_`\s]*", re.IGNORECASE)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def _expected(backend: str) -> str:
    return (
        f"expected the whole kernel in a fenced ```{fence_language(backend)} block, SEARCH/REPLACE blocks, "
        "a unified diff, a JSON action or SUBMIT alone"
    )


def fence_language(backend: str) -> str:
    """The code-block language a backend's kernels are written in (its descriptor's ``language``)."""
    return str(_backend_info(backend).get("language", "cpp"))


# ---- rendering (the SFT export's rules) ----


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _json_action(action: Mapping[str, Any]) -> str:
    # nlohmann::json's dump(): keys in byte order (its objects are std::map), no spaces, UTF-8
    # unescaped. Python's sort on str is code-point order, which is UTF-8 byte order.
    return json.dumps(action, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def render_action(action: Mapping[str, Any], backend: str = "cpu") -> str:
    """An action as a policy would write it, exactly as ``kernelgym dataset export --format sft``.

    ``replace``: the source in a fenced block (```` ```cpp ````; ```` ```python ```` for pallas,
    ```` ```cuda ```` for cuda); ``edit``: SEARCH/REPLACE blocks separated by a blank line;
    ``patch``: a ```` ```diff ```` block; ``knobs`` and ``revert``: the action as compact JSON with
    sorted keys; ``submit``: ``SUBMIT``. Texts get a final newline when they lack one. Raises
    ``ValueError`` where the export writes nothing: an unknown kind, a missing or mistyped field.
    """
    kind = action.get("kind")
    if kind == "replace":
        source = action.get("source")
        if not isinstance(source, str):
            raise ValueError("replace action: 'source' must be a string")
        return f"```{fence_language(backend)}\n{_with_newline(source)}```"
    if kind == "edit":
        edits = action.get("edits")
        if not isinstance(edits, Sequence) or isinstance(edits, str) or not edits:
            raise ValueError("edit action: 'edits' must be a non-empty list")
        blocks = []
        for i, edit in enumerate(edits):
            search = edit.get("search") if isinstance(edit, Mapping) else None
            replace = edit.get("replace") if isinstance(edit, Mapping) else None
            if not isinstance(search, str) or not isinstance(replace, str):
                raise ValueError(f"edit action: edits[{i}] must have string 'search' and 'replace'")
            blocks.append(
                "<<<<<<< SEARCH\n" + _with_newline(search) + "=======\n" +
                (_with_newline(replace) if replace else "") + ">>>>>>> REPLACE"
            )  # fmt: skip
        return "\n\n".join(blocks)
    if kind == "patch":
        diff = action.get("diff")
        if not isinstance(diff, str):
            raise ValueError("patch action: 'diff' must be a string")
        return f"```diff\n{_with_newline(diff)}```"
    if kind == "knobs":
        if not isinstance(action.get("values"), Mapping):
            raise ValueError("knobs action: 'values' must be a map")
        return _json_action(action)
    if kind == "revert":
        to_step = action.get("to_step")
        if not isinstance(to_step, int) or isinstance(to_step, bool):
            raise ValueError("revert action: 'to_step' must be an integer")
        return _json_action(action)
    if kind == "submit":
        return "SUBMIT"
    raise ValueError(f"unknown action kind {kind!r}; expected one of {', '.join(_ACTION_KINDS)}")


# ---- parsing ----


@dataclass
class _Fence:
    language: str  # the info string's first word, lower case ("" when none)
    body: str  # the lines between the fences, each ending in "\n"
    line: int  # 1-based line of the opening fence
    closed: bool


def _fences(lines: list[str]) -> tuple[list[_Fence], list[str]]:
    """The fenced blocks (CommonMark rules) and the lines outside them (fence lines excluded)."""
    fences: list[_Fence] = []
    outside: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN.fullmatch(lines[i])
        if not opening:
            outside.append(lines[i])
            i += 1
            continue
        indent, marker, language = len(opening.group(1)), opening.group(2), opening.group(3).lower()
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            closing = _FENCE_CLOSE.fullmatch(lines[j])
            if closing and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker):
                closed = True
                break
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:] + "\n")
            j += 1
        fences.append(_Fence(language, "".join(body), i + 1, closed))
        i = j + 1
    return fences, outside


def _require_closed(fence: _Fence, what: str) -> None:
    if not fence.closed:
        raise ActionParseError(
            f"the {what} opened on line {fence.line} (```{fence.language}) is never closed; "
            "was the reply cut off? End the block with ```"
        )


def _parse_edits(lines: list[str]) -> list[dict[str, str]] | None:
    """SEARCH/REPLACE blocks; None when the reply has no marker at all."""
    if not any(_SEARCH_MARKER.fullmatch(x.strip()) or _REPLACE_MARKER.fullmatch(x.strip()) for x in lines):
        return None
    edits: list[dict[str, str]] = []
    state = "outside"  # or "search", "replace"
    search: list[str] = []
    replace: list[str] = []
    start = 0  # the line of the current block's SEARCH marker
    for number, line in enumerate(lines, start=1):
        marker = line.strip()
        block = f"SEARCH/REPLACE block {len(edits) + 1} (line {start})"
        if _SEARCH_MARKER.fullmatch(marker):
            if state == "search":
                raise ActionParseError(
                    f"{block}: no '=======' divider before the next '<<<<<<< SEARCH' on line {number}"
                )
            if state == "replace":
                raise ActionParseError(
                    f"{block}: no '>>>>>>> REPLACE' end marker before the next '<<<<<<< SEARCH' on line {number}"
                )
            state, search, replace, start = "search", [], [], number
        elif marker == _DIVIDER and state != "outside":
            if state == "replace":
                raise ActionParseError(f"{block}: a second '=======' divider on line {number}")
            state = "replace"
        elif _REPLACE_MARKER.fullmatch(marker):
            if state == "outside":
                raise ActionParseError(
                    f"SEARCH/REPLACE block {len(edits) + 1}: '>>>>>>> REPLACE' on line {number} "
                    "without a '<<<<<<< SEARCH' before it"
                )
            if state == "search":
                raise ActionParseError(f"{block}: '>>>>>>> REPLACE' on line {number} before the '=======' divider")
            if not search:
                raise ActionParseError(f"{block}: the SEARCH text is empty; copy the lines to change from the kernel")
            edits.append({"search": "".join(x + "\n" for x in search), "replace": "".join(x + "\n" for x in replace)})
            state = "outside"
        elif state == "search":
            search.append(line)
        elif state == "replace":
            replace.append(line)
    block = f"SEARCH/REPLACE block {len(edits) + 1} (line {start})"
    if state == "search":
        raise ActionParseError(f"{block}: no '=======' divider after '<<<<<<< SEARCH'")
    if state == "replace":
        raise ActionParseError(f"{block}: no '>>>>>>> REPLACE' end marker")
    return edits


def _bare_diff(lines: list[str]) -> str | None:
    """A unified diff written as open text: from its first header line while lines look like one."""
    start = None
    for i, line in enumerate(lines):
        if _HUNK_HEADER.match(line) or (
            line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        ):
            start = i
            break
    if start is None:
        return None
    while start > 0 and lines[start - 1].startswith(("diff ", "index ")):
        start -= 1
    end = start
    while end < len(lines) and (
        lines[end] == "" or lines[end][0] in " +-@\\" or lines[end].startswith(("diff ", "index "))
    ):
        end += 1
    while end > start and lines[end - 1] == "":
        end -= 1
    return "".join(x + "\n" for x in lines[start:end])


def _checked_diff(diff: str, where: str) -> dict[str, Any]:
    # The server refuses a diff without a hunk header (env/episode/source_edits.cc, ApplyPatch);
    # saying so here costs the policy no step.
    if "@@" not in diff:
        raise ActionParseError(f"{where} holds no '@@ -a,b +c,d @@' hunk header; a unified diff needs one")
    return {"kind": "patch", "diff": diff}


def _action_from_json(text: str) -> dict[str, Any] | None:
    """The action a JSON object spells; None when ``text`` is not a JSON object with a "kind"."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or "kind" not in value:
        return None
    kind = value["kind"]
    if kind not in _ACTION_KINDS:
        raise ActionParseError(f"JSON action: unknown kind {kind!r}; expected one of {', '.join(_ACTION_KINDS)}")
    fields = _ACTION_FIELDS[kind]
    extra = sorted(set(value) - {"kind", *fields})
    missing = [f for f in fields if f not in value]
    if extra or missing:
        problems = ([f"unknown field(s) {', '.join(extra)}"] if extra else []) + (
            [f"missing field(s) {', '.join(missing)}"] if missing else []
        )
        raise ActionParseError(f"JSON {kind} action: {'; '.join(problems)}")
    if kind == "knobs":
        values = value["values"]
        if not isinstance(values, dict) or any(
            isinstance(v, bool) or not isinstance(v, (int, float, str)) for v in values.values()
        ):
            raise ActionParseError("JSON knobs action: 'values' must map knob names to integers, numbers or strings")
    elif kind == "revert":
        if isinstance(value["to_step"], bool) or not isinstance(value["to_step"], int) or value["to_step"] < 0:
            raise ActionParseError("JSON revert action: 'to_step' must be a step number (an integer >= 0)")
    elif kind in ("replace", "patch"):
        if not isinstance(value[fields[0]], str):
            raise ActionParseError(f"JSON {kind} action: '{fields[0]}' must be a string")
    elif kind == "edit":
        edits = value["edits"]
        if (
            not isinstance(edits, list)
            or not edits
            or not all(
                isinstance(e, dict) and set(e) == {"search", "replace"} and all(isinstance(v, str) for v in e.values())
                for e in edits
            )
        ):
            raise ActionParseError("JSON edit action: 'edits' must be a non-empty list of {search, replace} strings")
    return value


def parse_action(reply: str, backend: str = "cpu") -> dict[str, Any]:
    """The wire action a model's reply spells (the formats and their order: the module's doc).

    ``backend`` chooses the code-block languages a whole kernel may be written in. Raises
    ``ActionParseError`` (a ``ValueError``) for a reply without an action or with a malformed one.
    """
    text = reply.replace("\r\n", "\n").replace("\r", "\n")
    # A reasoning model's drafts are not its answer. Each <think> section becomes as many empty
    # lines, so that line numbers in messages still count the reply's lines.
    text = _THINK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    if "<think>" in text:
        raise ActionParseError(
            f"the reply ends inside <think> (line {text[: text.index('<think>')].count(chr(10)) + 1}); was it cut off?"
        )
    if not text.strip():
        raise ActionParseError(f"empty reply; {_expected(backend)}")
    languages = _code_languages(backend)
    lines = text.split("\n")

    if text.strip().startswith("{"):
        action = _action_from_json(text.strip())
        if action is not None:
            return action

    edits = _parse_edits(lines)
    if edits is not None:
        return {"kind": "edit", "edits": edits}

    fences, outside = _fences(lines)
    diffs = [f for f in fences if f.language in _DIFF_LANGUAGES or _HUNK_HEADER.search(f.body)]
    if diffs:
        _require_closed(diffs[-1], "diff block")
        return _checked_diff(diffs[-1].body, f"the diff block on line {diffs[-1].line}")
    bare = _bare_diff(outside)
    if bare is not None:
        return _checked_diff(bare, "the unified diff")

    for fence in reversed(fences):
        if fence.language == "json" or (fence.language == "" and fence.body.lstrip().startswith("{")):
            action = _action_from_json(fence.body)
            if action is not None:
                _require_closed(fence, "JSON block")
                return action

    code = [f for f in fences if f.language in languages]
    if code:
        last = code[-1]
        _require_closed(last, "code block")
        if not last.body.strip():
            raise ActionParseError(f"the code block on line {last.line} is empty; {_expected(backend)}")
        return {"kind": "replace", "source": last.body}

    said = [x for x in outside if x.strip()]
    if said and _SUBMIT_LINE.fullmatch(said[-1]):
        return {"kind": "submit"}

    if fences:
        found = ", ".join(sorted({f"```{f.language}" if f.language else "``` (no language)" for f in fences}))
        raise ActionParseError(
            f"{_expected(backend)}; found only code blocks in other languages ({found}) for the "
            f"{backend} backend, which takes ```{fence_language(backend)}"
        )
    raise ActionParseError(
        f"{_expected(backend)}; found no fenced code block, SEARCH/REPLACE block or unified diff in the reply "
        f"({len(reply)} characters)"
    )


# ---- prompts ----


def _version(task_info: Mapping[str, Any] | None, backend: str) -> Mapping[str, Any]:
    """The backend's version of the task in a ``tasks.get`` answer (its starter, reference and
    build rules); empty when the answer has none for it."""
    versions = (task_info or {}).get("versions")
    version = versions.get(backend) if isinstance(versions, Mapping) else None
    return version if isinstance(version, Mapping) else {}


def _tensor_line(tensors: Any) -> str:
    if not isinstance(tensors, list):
        return ""
    parts = []
    for t in tensors:
        if isinstance(t, Mapping):
            # The shape as the task writes it (size names), else resolved at the timed sizes.
            shape = ", ".join(str(d) for d in (t.get("dims") or t.get("shape") or []))
            parts.append(f"{t.get('name', '?')} {t.get('dtype', '?')} [{shape}]")
    return "; ".join(parts)


def system_prompt(task_info: Mapping[str, Any], backend: str = "cpu") -> str:
    """The system message for a task: what to compute, the rules, and how to answer.

    ``task_info`` is ``Client.get_task``'s answer (``tasks.get``: description, signature, sizes,
    tensors, tolerance, knobs, and per backend its version).
    """
    version = _version(task_info, backend)
    task_id = task_info.get("id", "?")
    language = fence_language(backend)
    category = f" ({task_info['category']})" if task_info.get("category") else ""
    out = [f"You are optimizing a compute kernel for the kernelgym task `{task_id}`{category}."]
    out.append("")
    out.append("## Task")
    out.append(str(task_info.get("description") or "(no description)"))
    out.append("")
    signature = task_info.get("signature", "?")
    out.append(f'Entry point: `extern "C" {signature}`')
    sizes = task_info.get("sizes")
    if isinstance(sizes, Mapping) and sizes:
        out.append("Sizes: " + ", ".join(f"{name} = {value}" for name, value in sizes.items()))
    if _tensor_line(task_info.get("inputs")):
        out.append("Inputs (row-major, contiguous): " + _tensor_line(task_info.get("inputs")))
    if _tensor_line(task_info.get("outputs")):
        out.append("Outputs: " + _tensor_line(task_info.get("outputs")))
    tolerance = task_info.get("tolerance")
    if isinstance(tolerance, Mapping):
        out.append(
            f"Tolerance: |actual - expected| <= {tolerance.get('atol')} + {tolerance.get('rtol')} * |expected| per element"
        )
    threads = task_info.get("threads", 1)
    flops, nbytes = task_info.get("flops"), task_info.get("bytes")
    if flops is not None and nbytes is not None:
        out.append(f"Work per call: {flops} flops, {nbytes} bytes of compulsory memory traffic; threads: {threads}")

    headers = list(DEFAULT_ALLOWED_HEADERS)
    if isinstance(version.get("extra_allowed_headers"), list):
        headers += [str(h) for h in version["extra_allowed_headers"]]
    flags = version.get("compile_flags") or list(_DEFAULT_COMPILE_FLAGS)
    threading = (
        f"it may use {threads} threads (OpenMP)"
        if isinstance(threads, int) and threads > 1
        else "it runs on one thread"
    )
    out += [
        "",
        "## Rules",
        '- Write one source file with exactly one entry point, `extern "C"`, with the signature above; helper '
        + "functions are fine (make them `static`).",
        "- Include only these headers: " + ", ".join(f"<{h}>" for h in headers) + ".",
        f"- It is compiled with {' '.join(str(f) for f in flags)}; {threading}.",
        "- It must match the reference within the tolerance on fresh random inputs chosen by the environment; "
        + "only a correct kernel is timed, and reward grows with its speedup over the reference.",
        "- Each reply is one action; it is evaluated and the result shown before your next turn.",
    ]
    knobs = task_info.get("knobs")
    if isinstance(knobs, Mapping) and knobs:
        described = "; ".join(
            f"{name} in {json.dumps(k.get('values'))} (default {json.dumps(k.get('default'))})"
            for name, k in sorted(knobs.items())
            if isinstance(k, Mapping)
        )
        out.append(f"- This task also has a tuned template with knobs: {described}.")

    out += [
        "",
        "## How to answer",
        "Reply with one of:",
        f"1. The whole kernel in one fenced ```{language} block (when there are several, the last one is used).",
        "2. Edits to the current kernel, one or more blocks of this form; the SEARCH text must be whole lines "
        + "that occur exactly once in the current kernel:",
        "<<<<<<< SEARCH",
        "(the exact lines to change)",
        "=======",
        "(the lines that replace them)",
        ">>>>>>> REPLACE",
        "3. A unified diff against the current kernel in a ```diff block.",
    ]
    n = 4
    if isinstance(knobs, Mapping) and knobs:
        example = {name: k.get("default") for name, k in sorted(knobs.items()) if isinstance(k, Mapping)}
        out.append(f"{n}. A knob setting as JSON: {_json_action({'kind': 'knobs', 'values': example})}")
        n += 1
    out.append(f'{n}. A JSON revert to an earlier step\'s kernel: {{"kind":"revert","to_step":0}}')
    out.append(
        f"{n + 1}. SUBMIT alone on the last line, to end the episode with a final, stricter evaluation "
        "of the current kernel."
    )
    out.append("You may think before the answer; put nothing after it.")
    return "\n".join(out) + "\n"


def observation_message(
    observation: Mapping[str, Any],
    task_info: Mapping[str, Any] | None = None,
    backend: str = "cpu",
    include_source: bool | None = None,
) -> dict[str, str]:
    """A user message with the observation's Markdown ``text``.

    The kernel's source is appended after a reset (step 0: the starter) — later, the model has
    the kernels it wrote in the conversation — unless ``include_source`` says otherwise. Without
    it, a later step's content is the ``text`` exactly, which is the prompt of the trajectory
    store's records and SFT examples (docs/dataset.md). ``task_info`` supplies the starter when
    the observation carries no source.
    """
    text = str(observation.get("text") or "")
    step = observation.get("step", 0)
    if include_source is None:
        include_source = step == 0
    if not include_source:
        return {"role": "user", "content": text}
    source = observation.get("source") or _version(task_info, backend).get("starter_source") or ""
    label = "The starter kernel (the current source)" if step == 0 else "The current source"
    content = f"{_with_newline(text)}\n{label}:\n```{fence_language(backend)}\n{_with_newline(str(source))}```\n"
    return {"role": "user", "content": content}


def starter_message(task_info: Mapping[str, Any], backend: str = "cpu") -> dict[str, str]:
    """The first user message of an episode made from the task alone, with no measurement in it:
    the same for every run, machine and load, so a dataset of prompts made with it is reproducible
    (``observation_message`` of a reset carries the starter's measured timings, profile and the
    seconds left, which differ from run to run). ``task_info`` is ``Client.get_task``'s answer."""
    task = str(task_info.get("id") or task_info.get("name") or "")
    source = _version(task_info, backend).get("starter_source") or ""
    content = (f"## {task} | step 0\n"
               "The starter kernel below is correct and is the current source; timings are not shown here.\n"
               f"\nThe starter kernel (the current source):\n```{fence_language(backend)}\n"
               f"{_with_newline(str(source))}```\n")
    return {"role": "user", "content": content}
