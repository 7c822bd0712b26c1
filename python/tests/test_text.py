"""kernelgym.text: prompts, the reply parser, and its agreement with the SFT export's rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgym.text import (
    DEFAULT_ALLOWED_HEADERS,
    ActionParseError,
    observation_message,
    parse_action,
    render_action,
    system_prompt,
)

REPO = Path(__file__).resolve().parents[2]
SOFTMAX = REPO / "datasets" / "suites" / "cpu" / "softmax_rows"

KERNEL = (
    'extern "C" void kernel(const float* x, float* y, int64_t n) {\n  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n}\n'
)
DIFF = "--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n"


# ---- render_action: the strings of tests/unit/trajectory_test.cc (RendersEachActionKind...) ----


@pytest.mark.parametrize(
    ("action", "backend", "text"),
    [
        ({"kind": "replace", "source": "int x;\n"}, "cpu", "```cpp\nint x;\n```"),
        ({"kind": "replace", "source": "def k(): pass"}, "pallas", "```python\ndef k(): pass\n```"),
        ({"kind": "replace", "source": "int x;"}, "cuda", "```cuda\nint x;\n```"),
        (
            {"kind": "edit", "edits": [{"search": "a\nb", "replace": "c\n"}, {"search": "d", "replace": ""}]},
            "cpu",
            "<<<<<<< SEARCH\na\nb\n=======\nc\n>>>>>>> REPLACE\n\n<<<<<<< SEARCH\nd\n=======\n>>>>>>> REPLACE",
        ),
        ({"kind": "patch", "diff": "-a\n+b"}, "cpu", "```diff\n-a\n+b\n```"),
        (
            {"kind": "knobs", "values": {"unroll": 4, "order": "ij"}},
            "cpu",
            '{"kind":"knobs","values":{"order":"ij","unroll":4}}',
        ),
        ({"kind": "revert", "to_step": 2}, "cpu", '{"kind":"revert","to_step":2}'),
        ({"kind": "submit"}, "cpu", "SUBMIT"),
    ],
)
def test_render_matches_the_sft_export(action, backend, text):
    assert render_action(action, backend) == text


@pytest.mark.parametrize(
    "action",
    [
        {"kind": "edit", "edits": []},
        {"kind": "revert", "to_step": "two"},
        {"kind": "revert", "to_step": True},
        {"kind": "replace"},
        {"kind": "knobs", "values": [1]},
        {"kind": "jump"},
        {},
    ],
)
def test_render_refuses_what_the_export_skips(action):
    with pytest.raises(ValueError):
        render_action(action)


# ---- round trips ----

ROUND_TRIP_ACTIONS = [
    {"kind": "replace", "source": KERNEL},
    {"kind": "edit", "edits": [{"search": "  y[i] = x[i];\n", "replace": "  y[i] = 2 * x[i];\n"}]},
    {
        "kind": "edit",
        "edits": [
            {"search": "a\nb\n", "replace": "c\n"},
            {"search": "d\n", "replace": ""},
            {"search": "  indented\n\n  with a blank line\n", "replace": "=== not a divider\n"},
        ],
    },
    {"kind": "patch", "diff": DIFF},
    {"kind": "knobs", "values": {"SIMD": 1, "EXP": "exp_poly", "RECOMPUTE": 0}},
    {"kind": "knobs", "values": {}},
    {"kind": "knobs", "values": {"TILE": 0.5, "NAME": "ünïcode"}},
    {"kind": "revert", "to_step": 0},
    {"kind": "revert", "to_step": 7},
    {"kind": "submit"},
]


@pytest.mark.parametrize("action", ROUND_TRIP_ACTIONS, ids=lambda a: a["kind"])
@pytest.mark.parametrize("backend", ["cpu", "cuda", "pallas"])
def test_parse_of_render_is_the_action(action, backend):
    assert parse_action(render_action(action, backend), backend) == action


@pytest.mark.parametrize("action", ROUND_TRIP_ACTIONS, ids=lambda a: a["kind"])
def test_render_of_parse_is_the_text(action):
    text = render_action(action)
    assert render_action(parse_action(text)) == text


def test_round_trip_adds_the_final_newline_the_export_adds():
    # The export writes texts with a final newline; the parser reads whole lines. A text without
    # one comes back with it, the same for both sides of an edit.
    assert parse_action(render_action({"kind": "replace", "source": "int x;"})) == {
        "kind": "replace",
        "source": "int x;\n",
    }
    edit = {"kind": "edit", "edits": [{"search": "a\nb", "replace": "c"}]}
    assert parse_action(render_action(edit)) == {"kind": "edit", "edits": [{"search": "a\nb\n", "replace": "c\n"}]}
    assert parse_action(render_action({"kind": "patch", "diff": DIFF.rstrip("\n")})) == {"kind": "patch", "diff": DIFF}


def test_parses_every_line_of_an_exported_sft_file(tmp_path):
    # The shape of `kernelgym dataset export --format sft`: the assistant turn parses back.
    rows = [
        {"messages": [{"role": "user", "content": "## t | step 0"}, {"role": "assistant", "content": render_action(a)}]}
        for a in ROUND_TRIP_ACTIONS
    ]
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    read = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [parse_action(r["messages"][1]["content"]) for r in read] == ROUND_TRIP_ACTIONS


# ---- replace: fenced code blocks ----


@pytest.mark.parametrize("language", ["cpp", "c++", "c", "cc", "cxx", "", "CPP"])
def test_a_code_block_in_a_cpp_language_is_a_replace(language):
    reply = f"Here is a faster kernel.\n\n```{language}\n{KERNEL}```\n\nIt vectorizes the loop."
    assert parse_action(reply) == {"kind": "replace", "source": KERNEL}


def test_the_last_code_block_wins():
    reply = f"First try:\n```cpp\nint a;\n```\nBetter:\n```cpp\n{KERNEL}```\n"
    assert parse_action(reply) == {"kind": "replace", "source": KERNEL}


def test_blocks_in_other_languages_are_skipped():
    reply = f"```cpp\n{KERNEL}```\nCompile with:\n```bash\ng++ -O3 kernel.cpp\n```\n"
    assert parse_action(reply) == {"kind": "replace", "source": KERNEL}


def test_fence_details():
    # An info string after the language, a longer fence holding a shorter one, tildes, indentation.
    assert parse_action('```cpp title="kernel.cc"\nint x;\n```') == {"kind": "replace", "source": "int x;\n"}
    assert parse_action("````cpp\n// ```\nint x;\n````") == {"kind": "replace", "source": "// ```\nint x;\n"}
    assert parse_action("~~~cpp\nint x;\n~~~") == {"kind": "replace", "source": "int x;\n"}
    assert parse_action("1. The kernel:\n   ```cpp\n   int x;\n     int y;\n   ```") == {
        "kind": "replace",
        "source": "int x;\n  int y;\n",
    }


def test_the_backend_chooses_the_languages():
    assert parse_action("```cuda\nint x;\n```", "cuda") == {"kind": "replace", "source": "int x;\n"}
    assert parse_action("```python\ndef k(): pass\n```", "pallas") == {"kind": "replace", "source": "def k(): pass\n"}
    with pytest.raises(ActionParseError, match=r"other languages \(```python\).*cpu backend, which takes ```cpp"):
        parse_action("```python\ndef k(): pass\n```", "cpu")


def test_crlf_line_endings_are_normalized():
    assert parse_action(f"```cpp\r\n{KERNEL.replace(chr(10), chr(13) + chr(10))}```\r\n") == {
        "kind": "replace",
        "source": KERNEL,
    }
    reply = "<<<<<<< SEARCH\r\na\r\n=======\r\nb\r\n>>>>>>> REPLACE\r\n"
    assert parse_action(reply) == {"kind": "edit", "edits": [{"search": "a\n", "replace": "b\n"}]}
    assert parse_action("```diff\r\n" + DIFF.replace("\n", "\r\n") + "```") == {"kind": "patch", "diff": DIFF}


def test_an_unclosed_code_block_is_refused():
    with pytest.raises(ActionParseError, match=r"code block opened on line 2 \(```cpp\) is never closed"):
        parse_action("Here:\n```cpp\nint x;\nint y")


def test_an_empty_code_block_is_refused():
    with pytest.raises(ActionParseError, match="code block on line 1 is empty"):
        parse_action("```cpp\n\n```")


# ---- edit: SEARCH/REPLACE blocks ----


def test_several_search_replace_blocks_in_order():
    reply = (
        "Two changes.\n\n"
        "<<<<<<< SEARCH\n    float sum = 0.0f;\n=======\n    double sum = 0.0;\n>>>>>>> REPLACE\n"
        "and then\n"
        "<<<<<<< SEARCH\n            yr[c] = yr[c] / sum;\n=======\n            yr[c] = yr[c] * inv;\n"
        "            // scaled\n>>>>>>> REPLACE\n"
    )
    assert parse_action(reply) == {
        "kind": "edit",
        "edits": [
            {"search": "    float sum = 0.0f;\n", "replace": "    double sum = 0.0;\n"},
            {
                "search": "            yr[c] = yr[c] / sum;\n",
                "replace": "            yr[c] = yr[c] * inv;\n            // scaled\n",
            },
        ],
    }


def test_search_replace_inside_a_code_fence():
    reply = "```cpp\n<<<<<<< SEARCH\nint a;\n=======\nint b;\n>>>>>>> REPLACE\n```\n"
    assert parse_action(reply) == {"kind": "edit", "edits": [{"search": "int a;\n", "replace": "int b;\n"}]}


def test_an_empty_replacement_deletes():
    reply = "<<<<<<< SEARCH\n// unused\n=======\n>>>>>>> REPLACE"
    assert parse_action(reply) == {"kind": "edit", "edits": [{"search": "// unused\n", "replace": ""}]}


def test_marker_lengths_and_trailing_spaces_are_tolerated():
    reply = "<<<<< SEARCH  \na\n=======\nb\n>>>>>>>>> REPLACE\t\n"
    assert parse_action(reply) == {"kind": "edit", "edits": [{"search": "a\n", "replace": "b\n"}]}


def test_search_replace_wins_over_a_code_block():
    reply = f"```cpp\n{KERNEL}```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    assert parse_action(reply)["kind"] == "edit"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n",
            r"block 1 \(line 1\): '>>>>>>> REPLACE' on line 3 before the '=======' divider",
        ),
        ("<<<<<<< SEARCH\na\nb\n", r"block 1 \(line 1\): no '=======' divider after '<<<<<<< SEARCH'"),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n\n<<<<<<< SEARCH\nc\n=======\nd\n",
            r"block 2 \(line 7\): no '>>>>>>> REPLACE' end marker",
        ),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n",
            r"block 1 \(line 1\): no '>>>>>>> REPLACE' end marker before the next '<<<<<<< SEARCH' on line 5",
        ),
        (
            "<<<<<<< SEARCH\na\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n",
            r"block 1 \(line 1\): no '=======' divider before the next '<<<<<<< SEARCH' on line 3",
        ),
        ("text\n=======\nb\n>>>>>>> REPLACE\n", r"block 1: '>>>>>>> REPLACE' on line 4 without a '<<<<<<< SEARCH'"),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE",
            r"block 1 \(line 1\): a second '=======' divider on line 5",
        ),
        ("<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE", r"block 1 \(line 1\): the SEARCH text is empty"),
    ],
)
def test_malformed_search_replace_names_the_block(reply, message):
    with pytest.raises(ActionParseError, match=message):
        parse_action(reply)


# ---- patch: unified diffs ----


def test_a_diff_block_is_a_patch():
    assert parse_action(f"The change:\n```diff\n{DIFF}```\nDone.") == {"kind": "patch", "diff": DIFF}


@pytest.mark.parametrize("language", ["", "patch", "cpp"])
def test_a_code_block_holding_a_hunk_is_a_patch(language):
    assert parse_action(f"```{language}\n{DIFF}```") == {"kind": "patch", "diff": DIFF}


def test_a_bare_diff_in_the_text_is_a_patch():
    reply = f"I changed one line:\n\ndiff --git a/kernel.cpp b/kernel.cpp\n{DIFF}\nThis removes b."
    assert parse_action(reply) == {"kind": "patch", "diff": "diff --git a/kernel.cpp b/kernel.cpp\n" + DIFF}


def test_a_bare_hunk_without_file_headers_is_a_patch():
    hunk = "@@ -2,1 +2,1 @@\n-b\n+c\n"
    assert parse_action("Change:\n" + hunk) == {"kind": "patch", "diff": hunk}


def test_a_diff_block_without_a_hunk_header_is_refused():
    with pytest.raises(ActionParseError, match="diff block on line 1 holds no '@@"):
        parse_action("```diff\n-a\n+b\n```")


def test_a_diff_wins_over_a_later_code_block():
    assert parse_action(f"```diff\n{DIFF}```\n```cpp\n{KERNEL}```")["kind"] == "patch"


# ---- JSON actions (knobs, revert) ----


def test_json_actions_alone_or_in_a_json_block():
    knobs = {"kind": "knobs", "values": {"SIMD": 1}}
    assert parse_action('  {"kind": "knobs", "values": {"SIMD": 1}}\n') == knobs
    assert parse_action('Setting SIMD on.\n```json\n{"kind": "knobs", "values": {"SIMD": 1}}\n```') == knobs
    assert parse_action('```\n{"kind":"revert","to_step":3}\n```') == {"kind": "revert", "to_step": 3}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ('{"kind": "jump"}', "unknown kind 'jump'"),
        ('{"kind": "knobs"}', "missing field"),
        ('{"kind": "revert", "to_step": 1, "why": "x"}', "unknown field"),
        ('{"kind": "revert", "to_step": -1}', "integer >= 0"),
        ('{"kind": "knobs", "values": {"SIMD": [1]}}', "integers, numbers or strings"),
        ('{"kind": "edit", "edits": []}', "non-empty list"),
    ],
)
def test_malformed_json_actions_are_refused(reply, message):
    with pytest.raises(ActionParseError, match=message):
        parse_action(reply)


def test_json_that_is_not_an_action_is_not_one():
    with pytest.raises(ActionParseError, match="found no fenced code block"):
        parse_action('{"speedup": 2}')


# ---- submit ----


@pytest.mark.parametrize(
    "reply", ["SUBMIT", "  SUBMIT\n", "**SUBMIT**", "`SUBMIT`", "Submit.", "It is fast enough now.\n\nSUBMIT"]
)
def test_submit_alone(reply):
    assert parse_action(reply) == {"kind": "submit"}


def test_submit_in_a_sentence_is_not_an_action():
    with pytest.raises(ActionParseError):
        parse_action("I will SUBMIT this later")


def test_a_code_block_wins_over_submit():
    assert parse_action(f"```cpp\n{KERNEL}```\nSUBMIT")["kind"] == "replace"


# ---- no action ----


@pytest.mark.parametrize("reply", ["", "   \n\t\n", "\r\n"])
def test_an_empty_reply_is_refused(reply):
    with pytest.raises(ActionParseError, match=r"^empty reply; expected the whole kernel in a fenced ```cpp block"):
        parse_action(reply)


def test_prose_is_refused_with_what_was_expected_and_found():
    reply = "I think the kernel could be faster if it used AVX2. " * 8
    with pytest.raises(ActionParseError) as error:
        parse_action(reply)
    assert isinstance(error.value, ValueError)
    message = str(error.value)
    assert "expected the whole kernel in a fenced ```cpp block" in message
    assert (
        f"found no fenced code block, SEARCH/REPLACE block or unified diff in the reply ({len(reply)} characters)"
        in message
    )


# ---- prompts ----


def softmax_task_info() -> dict:
    """The golden tasks.get answer (what the C++ server's typed TaskInfo writes)."""
    return json.loads((REPO / "tests" / "fixtures" / "protocol" / "reply_tasks_get.json").read_text())["result"]


def test_system_prompt_states_the_task_the_rules_and_the_formats():
    info = softmax_task_info()
    prompt = system_prompt(info)
    assert "`cpu/softmax_rows`" in prompt
    assert info["description"] in prompt
    assert 'extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C)' in prompt
    assert "C = 1024, R = 256" in prompt
    assert "x float32 [R, C]" in prompt and "y float32 [R, C]" in prompt
    assert "Tolerance: |actual - expected| <= 1e-05 + 0.0001 * |expected|" in prompt
    assert "-O3 -march=native -fopenmp" in prompt
    assert all(f"<{h}>" in prompt for h in DEFAULT_ALLOWED_HEADERS)
    assert "```cpp" in prompt and "<<<<<<< SEARCH" in prompt and "```diff" in prompt and "SUBMIT" in prompt
    assert "SIMD in [0, 1] (default 0)" in prompt
    assert '{"kind":"knobs","values":{"EXP":"std::exp","SIMD":0}}' in prompt


def test_system_prompt_adds_a_tasks_extra_headers_and_reads_a_bare_summary():
    info = softmax_task_info()
    info["versions"]["cpu"]["extra_allowed_headers"] = ["arm_neon.h"]
    assert "<arm_neon.h>" in system_prompt(info)
    bare = {"id": "x/y", "description": "d", "signature": "void kernel(float* y, int64_t n)"}
    prompt = system_prompt(bare)
    assert "`x/y`" in prompt and "knobs" not in prompt


def test_the_formats_the_system_prompt_shows_parse():
    # Each example answer the prompt gives is one the parser reads.
    prompt = system_prompt(softmax_task_info())
    knobs_line = next(x for x in prompt.splitlines() if x.startswith("4. A knob setting"))
    assert parse_action(knobs_line.split(": ", 1)[1])["kind"] == "knobs"
    revert_line = next(x for x in prompt.splitlines() if "revert" in x)
    assert parse_action(revert_line[revert_line.index("{") :]) == {"kind": "revert", "to_step": 0}


def observation(step: int, **fields) -> dict:
    base = {"step": step, "status": "ok", "text": f"## cpu/softmax_rows | step {step}\nstatus: ok\n", "source": KERNEL}
    return {**base, **fields}


def test_the_first_observation_message_carries_the_starter():
    info = softmax_task_info()
    starter = info["versions"]["cpu"]["starter_source"]
    message = observation_message(observation(0, source=starter), info)
    assert message["role"] == "user"
    assert message["content"].startswith("## cpu/softmax_rows | step 0\nstatus: ok\n")
    # The starter is shown the way a replace would be written, so the model can copy from it.
    assert render_action({"kind": "replace", "source": starter}) in message["content"]


def test_the_first_observation_message_falls_back_on_the_tasks_starter():
    info = softmax_task_info()
    message = observation_message(observation(0, source=""), info)
    assert info["versions"]["cpu"]["starter_source"] in message["content"]


def test_later_observation_messages_are_the_recorded_prompt():
    # The trajectory store records a step's prompt as the previous observation's text; the
    # message is exactly that, so rollouts and exported SFT data look the same.
    obs = observation(3, text="## t | step 3\ninvalid action (not applied; the source is unchanged): x\n")
    assert observation_message(obs) == {"role": "user", "content": obs["text"]}
    with_source = observation_message(obs, include_source=True)["content"]
    assert with_source.startswith(obs["text"]) and f"```cpp\n{KERNEL}```" in with_source


def test_think_sections_are_not_the_answer():
    reply = f"<think>\nMaybe\n```cpp\nint draft;\n```\n<<<<<<< SEARCH\nx\n</think>\n```cpp\n{KERNEL}```"
    assert parse_action(reply) == {"kind": "replace", "source": KERNEL}
    assert parse_action("<think>a code block is not needed</think>\nSUBMIT") == {"kind": "submit"}
    with pytest.raises(ActionParseError, match=r"ends inside <think> \(line 2\)"):
        parse_action("Well.\n<think>\n```cpp\nint x;\n```")
    with pytest.raises(ActionParseError, match=r"^empty reply"):
        parse_action("<think>only thoughts</think>\n")
    with pytest.raises(ActionParseError, match=r"block 1 \(line 4\): no '=======' divider"):
        parse_action("<think>\none\n</think>\n<<<<<<< SEARCH\na\n")


def test_messages_name_the_backends_language():
    with pytest.raises(ActionParseError, match=r"fenced ```cuda block"):
        parse_action("nothing", "cuda")
