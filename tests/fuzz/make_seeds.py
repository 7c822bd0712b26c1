#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/ from what the repository already has:
the protocol's golden fixtures, task.json files of the suites, the agent's scripted replies and
the edits, knob lists and replies the unit tests use. Run it after changing those sources; the
output is checked in. The FuzzedDataProvider targets (source_edits, knobs) get their inputs
encoded the way FuzzedDataProvider reads them (strings from the front, integers from the back).
"""
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures" / "protocol"

# task.json seeds: every cpu and models task, and jaxbench tasks with knobs or structured inputs
# (permutation, partition, randint, uniform steps).
TASKS = ["cpu/*", "models/*", "jaxbench-p/ragged_paged_attention", "jaxbench-p/paged_attention",
         "jaxbench-p/ragged_dot", "jaxbench-p/megablox_gmm", "jaxbench-p/cross_entropy",
         "jaxbench-k/gemm_add_relu", "jaxbench-k/matmul_gelu_softmax"]


class Provider:
    """Builds bytes that LLVM's FuzzedDataProvider reads back as the given values, in order."""

    def __init__(self):
        self.front = bytearray()
        self.back = bytearray()  # in consumption order; FuzzedDataProvider reads it from the end

    def string(self, text):  # ConsumeRandomLengthString: '\\' escapes itself, '\\' + other ends it
        self.front += text.encode().replace(b"\\", b"\\\\") + b"\\\n"
        return self

    def int(self, value, low, high):  # ConsumeIntegralInRange with high - low < 256
        assert low <= value <= high and high - low < 256
        self.back.append(value - low)
        return self

    def bool(self, value):
        return self.int(int(value), 0, 255)

    def uint64(self, value):  # ConsumeIntegral<uint64_t>: eight bytes, most significant first
        self.back += value.to_bytes(8, "big")
        return self

    def rest(self, text):  # ConsumeRemainingBytesAsString
        self.front += text.encode()
        return self

    def bytes(self):
        return bytes(self.front) + bytes(reversed(self.back))


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def protocol_seeds():
    for f in sorted(FIXTURES.glob("*.msgpack")):
        target = {"request": "request", "reply": "reply", "runner": "runner_protocol"}[f.name.split("_")[0]]
        shutil.copyfile(f, CORPUS / target / f.name)


def task_seeds():
    for pattern in TASKS:
        for task in sorted((ROOT / "datasets" / "suites").glob(pattern + "/task.json")):
            write("task_loader", f"{task.parent.parent.name}_{task.parent.name}.json", task.read_bytes())
    # Regressions (UBSan): extents whose product overflows int64; tensors past int64 bytes together.
    base = json.loads((ROOT / "datasets" / "suites" / "cpu" / "softmax_rows" / "task.json").read_text())
    task = json.loads(json.dumps(base))
    task["inputs"][0]["shape"] = [1 << 32, 1 << 32]
    write("task_loader", "regression_shape_overflow.json", json.dumps(task))
    task = json.loads(json.dumps(base))
    task["inputs"] += [{"name": f"z{i}", "dtype": "float64", "shape": [1 << 30, 1 << 29],
                        "init": {"kind": "normal", "mean": 0, "std": 1}} for i in range(3)]
    task["bytes"] = 1e30
    write("task_loader", "regression_bytes_overflow.json", json.dumps(task))
    # Regression (uncaught exception): a number past a double's range is out_of_range, not parse_error.
    write("task_loader", "regression_number_overflow.json", "1" + "0" * 400)


SOURCE = ("extern \"C\" void kernel(const float* x, float* y, int64_t N) {\n"
          "  for (int64_t i = 0; i < N; ++i) {\n    float s = 0;\n    y[i] = x[i] + s;\n  }\n}\n")


def edit_seeds():
    def edits(name, source, blocks, diff=""):
        p = Provider().string(source).int(len(blocks), 0, 4)
        for search, replace in blocks:
            p.string(search).string(replace)
        write("source_edits", name, p.rest(diff).bytes())

    edits("one_block", SOURCE, [("    float s = 0;\n", "    double s = 0;\n")])
    edits("two_blocks", SOURCE, [("float s", "double s"), ("x[i] + s", "x[i] * 2 + s")])
    edits("ambiguous", SOURCE, [("i", "j")])
    edits("missing", SOURCE, [("return;\n", "")])
    edits("empty_search", SOURCE, [("", "x")])
    edits("overlapping", "aaaa", [("aa", "b")])
    edits("no_blocks", SOURCE, [], "--- a/k.cpp\n+++ b/k.cpp\n-a\n+b\n")
    edits("backslashes", "a\\b\\\\c", [("\\b", "\\\\b")])


def knob_seeds():
    def knobs(name, knob_list, json_text, task_knobs, values, limit=8, seed=1):
        p = Provider().string(knob_list).string(json_text)
        p.int(len(task_knobs), 0, 5)
        for knob_name, domain, default in task_knobs:
            ints = isinstance(domain[0], int)
            p.string(knob_name).bool(ints).int(len(domain), 1, 6)
            for v in domain:
                if ints:
                    p.int(v, -4, 64)
                else:
                    p.string(v)
            if len(domain) > 1:
                p.int(domain.index(default), 0, len(domain) - 1)
        p.string("#ifndef SIMD\n#error\n#endif\nextern \"C\" void kernel() {}\n")
        p.int(len(values), 0, 6)
        names = [k[0] for k in sorted(task_knobs)]
        for knob_name, value in values:
            known = knob_name in names
            if task_knobs:
                p.bool(known)
            if known:
                if len(names) > 1:
                    p.int(names.index(knob_name), 0, len(names) - 1)
            else:
                p.string(knob_name)
            if known:
                p.bool(False)  # a value from the input, not from the domain
            if isinstance(value, int):
                p.int(0, 0, 2).int(value, -4, 64)
            else:
                p.int(2, 0, 2).string(value)
        p.int(limit, 0, 40).uint64(seed)
        write("knobs", name, p.bytes())

    softmax = [("EXP", ["std_exp", "exp_poly"], "std_exp"), ("SIMD", [0, 1], 0), ("UNROLL", [1, 2, 4], 1)]
    knobs("softmax_defaults", "SIMD=1,EXP=exp_poly", '{"space": {"SIMD": [0, 1], "EXP": ["exp_poly"]}}', softmax, [])
    knobs("softmax_values", "SIMD=0,UNROLL=4", "[16, -3, 2.5, \"std::exp\", null, 18446744073709551615]", softmax,
          [("SIMD", 1), ("EXP", "exp_poly")], limit=3)
    knobs("unknown_knob", "A=1,B", "9223372036854775807", softmax, [("TILE", 32)])
    knobs("wrong_value", "TILE=99999999999999999999", '"exp_poly"', softmax, [("UNROLL", 3), ("SIMD", "1")])
    knobs("no_knobs", "=1", "{}", [], [("SIMD", 1)])


REPLIES = [
    # roles_test.cc
    "Sure.\n```python\nprint()\n```\n```cpp\nint k;\n```\nDone.",
    "```cpp\n<<<<<<< SEARCH\n  float s = 0;\n=======\n  double s = 0;\n>>>>>>> REPLACE\n```\n"
    "<<<<<<< SEARCH\nreturn;\n=======\n>>>>>>> REPLACE\n",
    "```diff\n--- a/k.cpp\n+++ b/k.cpp\n@@ -1 +1 @@\n-a\n+b\n```",
    "```cpp\nint k = ",
    "<<<<<<< SEARCH\na\n=======\nb\n",
    "1. exp dominates (60%)\n**DECISION: Tune** - the tile size\n",
    "```json\n{\"space\": {\"SIMD\": [0, 1], \"EXP\": [\"exp_poly\"]}}\n```",
    "```cpp\nconstexpr int kTile = @TILE@;\nauto f = @FN@;\n```\n```json\n"
    "{\"space\": {\"TILE\": [16, 32], \"FN\": [\"a\"]}}\n```",
    "Here is my plan.\n## Analysis\nmemory bound at 40% of peak\n**Strategy**\nfuse the passes\n"
    "3. Memory and tiling layout:\nrows of 1024 floats stay in L1\n### Hardware-specific optimizations\nAVX-512\n"
    "## Expected impact\n2x\n",
]


def reply_seeds():
    for i, reply in enumerate(REPLIES):
        write("reply_parsers", f"roles_test_{i}.md", reply)
    for f in sorted((ROOT / "policies" / "agent" / "scripted" / "softmax_rows").glob("*.md")):
        if f.name != "README.md":
            write("reply_parsers", f"scripted_{f.name}", f.read_bytes())


if __name__ == "__main__":
    for target in ["request", "reply", "runner_protocol", "source_edits", "knobs", "reply_parsers", "task_loader"]:
        shutil.rmtree(CORPUS / target, ignore_errors=True)
        (CORPUS / target).mkdir(parents=True)
    protocol_seeds()
    task_seeds()
    edit_seeds()
    knob_seeds()
    reply_seeds()
