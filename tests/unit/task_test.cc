// The task loader (datasets/task.h) and registry (datasets/suite.h): the bundled tasks load and
// satisfy their invariants; every kind of broken task.json fails with "<file>: <field>: ...".
#include "datasets/task.h"
#include "tests/common/temp_dir.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>

#include "core/digest.h"
#include "datasets/suite.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::TempDir;

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

const char* kReference =
    "def reference(x: Tensor, idx: Tensor) -> Tensor:\n"
    "    return x.sum(dim=1, keepdim=True).expand(-1, 2).to(torch.float64)\n";
const char* kStarter =
    "#include <cstdint>\n"
    "extern \"C\" void kernel(const float* x, const int64_t* idx, double* y, int64_t R, int64_t C) {\n"
    "  for (int64_t r = 0; r < R; ++r) { double s = 0; for (int64_t c = 0; c < C; ++c) s += x[r * C + c];\n"
    "    y[2 * r] = s; y[2 * r + 1] = s; }\n"
    "}\n";

// A valid task: R=4, C=8 (checked also at R=3, C=5); x float32 [R, C], idx int64 [R], y float64 [R, 2].
json ValidTaskJson(const std::string& id) {
  json task = json::parse(R"JSON({
    "category": "test",
    "description": "A small valid task for the loader tests.",
    "sizes": [{"name": "R", "value": 4}, {"name": "C", "value": 8}],
    "check_sizes": [{"R": 3, "C": 5}],
    "inputs": [
      {"name": "x", "dtype": "float32", "shape": ["R", "C"], "init": {"kind": "normal", "mean": 0.5, "std": 2.0}},
      {"name": "idx", "dtype": "int64", "shape": ["R"], "init": {"kind": "randint", "low": 0, "high": 8}}
    ],
    "outputs": [{"name": "y", "dtype": "float64", "shape": ["R", 2]}],
    "tolerance": {"atol": 1e-5, "rtol": 1e-4},
    "flops": 64,
    "bytes": 224,
    "signature": "void kernel(const float* x, const int64_t* idx, double* y, int64_t R, int64_t C)"
  })JSON");
  task["id"] = id;
  return task;
}

class TaskLoadTest : public ::testing::Test {
 protected:
  // Writes <tmp>/tst/<name>/{task.json, reference.py, starter.cpp} and returns the folder.
  fs::path Write(const std::string& name, const json& task, bool with_reference = true, bool with_starter = true) {
    return WriteRaw(name, task.dump(2), with_reference, with_starter);
  }
  fs::path WriteRaw(const std::string& name, const std::string& task_text, bool with_reference = true,
                    bool with_starter = true) {
    const fs::path dir = tmp_.path() / "tst" / name;
    WriteText(dir / "task.json", task_text);
    if (with_reference) WriteText(dir / "reference.py", kReference);
    if (with_starter) WriteText(dir / "starter.cpp", kStarter);
    return dir;
  }
  // A valid task for folder tst/<name>, with `patch` applied (RFC 7386: null removes a key).
  fs::path WritePatched(const std::string& name, const json& patch) {
    json task = ValidTaskJson("tst/" + name);
    task.merge_patch(patch);
    return Write(name, task);
  }

  // The load fails with "<dir>/task.json: <field>: <message>" and the message contains `what`.
  static void ExpectError(const fs::path& dir, const std::string& field, const std::string& what = "") {
    const TaskLoadResult r = LoadTask(dir);
    EXPECT_FALSE(r.task.has_value()) << "loaded although " << field << " is bad";
    const std::string prefix = (dir / "task.json").string() + ": " + field + ": ";
    EXPECT_EQ(r.error.rfind(prefix, 0), 0u) << "error: " << r.error << "\nexpected prefix: " << prefix;
    if (!what.empty()) {
      EXPECT_NE(r.error.find(what), std::string::npos) << "error: " << r.error << "\nwanted: " << what;
    }
  }

  TempDir tmp_;
};

// The digest a job carries (core/digest.h): the same folder content anywhere has the same
// digest; any change to what the runner reads (a tolerance, the reference, a backend's file)
// changes it; what tools leave behind (__pycache__, dot files) does not.
TEST_F(TaskLoadTest, TheDigestFollowsTheFolderContentOnly) {
  const fs::path a = Write("digest_a", ValidTaskJson("tst/digest_a"));
  const std::string digest = LoadTask(a).task.value().digest;
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_EQ(digest, TaskFolderDigest(a));

  WriteText(a / "__pycache__" / "reference.cpython-311.pyc", "bytecode");
  WriteText(a / ".nfs0001", "editor");
  EXPECT_EQ(LoadTask(a).task.value().digest, digest) << "left by tools: not the task's content";

  json looser = ValidTaskJson("tst/digest_a");
  looser["tolerance"]["rtol"] = 0.5;
  Write("digest_a", looser);
  EXPECT_NE(LoadTask(a).task.value().digest, digest) << "a looser tolerance is another task";
  Write("digest_a", ValidTaskJson("tst/digest_a"));
  EXPECT_EQ(LoadTask(a).task.value().digest, digest);

  WriteText(a / "reference.py", std::string(kReference) + "# another reference\n");
  EXPECT_NE(LoadTask(a).task.value().digest, digest) << "another reference is another task";
  WriteText(a / "reference.py", kReference);
  WriteText(a / "pallas" / "reference.py", "def reference(x): return x\n");
  EXPECT_NE(TaskFolderDigest(a), digest) << "a backend's file is part of the task";
  fs::remove_all(a / "pallas");
  EXPECT_EQ(TaskFolderDigest(a), digest);
  // Names matter, not only bytes: the same content under another file name differs.
  fs::rename(a / "starter.cpp", a / "starter2.cpp");
  EXPECT_NE(TaskFolderDigest(a), digest);
}

TEST_F(TaskLoadTest, ValidTaskLoadsWithEveryField) {
  const fs::path dir = Write("good", ValidTaskJson("tst/good"));
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_TRUE(r.error.empty());
  const Task& t = *r.task;
  EXPECT_EQ(t.id, "tst/good");
  EXPECT_EQ(t.Suite(), "tst");
  EXPECT_EQ(t.category, "test");
  EXPECT_EQ(t.dir, dir);
  ASSERT_EQ(t.sizes.size(), 2u);
  EXPECT_EQ(t.sizes[0].name, "R");
  EXPECT_EQ(t.sizes[0].value, 4);
  EXPECT_EQ(t.sizes[1].name, "C");
  EXPECT_EQ(t.sizes[1].value, 8);

  ASSERT_EQ(t.inputs.size(), 2u);
  EXPECT_EQ(t.inputs[0].name, "x");
  EXPECT_EQ(t.inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(t.inputs[0].shape, (std::vector<int64_t>{4, 8}));
  ASSERT_TRUE(t.inputs[0].init.has_value());
  EXPECT_EQ(t.inputs[0].init->kind, Initializer::Kind::kNormal);
  EXPECT_DOUBLE_EQ(t.inputs[0].init->a, 0.5);
  EXPECT_DOUBLE_EQ(t.inputs[0].init->b, 2.0);
  EXPECT_EQ(t.inputs[1].dtype, DType::kInt64);
  EXPECT_EQ(t.inputs[1].shape, (std::vector<int64_t>{4}));
  ASSERT_TRUE(t.inputs[1].init.has_value());
  EXPECT_EQ(t.inputs[1].init->kind, Initializer::Kind::kRandInt);
  EXPECT_DOUBLE_EQ(t.inputs[1].init->a, 0);
  EXPECT_DOUBLE_EQ(t.inputs[1].init->b, 8);

  ASSERT_EQ(t.outputs.size(), 1u);
  EXPECT_EQ(t.outputs[0].dtype, DType::kFloat64);
  EXPECT_EQ(t.outputs[0].shape, (std::vector<int64_t>{4, 2}));  // integer literal extents work
  EXPECT_FALSE(t.outputs[0].init.has_value());
  EXPECT_DOUBLE_EQ(t.outputs[0].tolerance.atol, 1e-5);  // inherited from the task
  EXPECT_DOUBLE_EQ(t.outputs[0].tolerance.rtol, 1e-4);
  EXPECT_DOUBLE_EQ(t.tolerance.atol, 1e-5);
  EXPECT_DOUBLE_EQ(t.tolerance.rtol, 1e-4);
  EXPECT_DOUBLE_EQ(t.flops, 64);
  EXPECT_DOUBLE_EQ(t.bytes, 224);
  EXPECT_EQ(t.signature, ExpectedSignature(t));

  // Defaults of the optional fields.
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(t.trials, 3);
  EXPECT_EQ(t.compile_flags, (std::vector<std::string>{"-O3", "-march=native", "-fopenmp"}));
  EXPECT_TRUE(t.policy.extra_allowed_headers.empty());
  EXPECT_EQ(t.policy.allowed_libraries, (std::vector<std::string>{"libc", "libm", "libgomp", "libstdc++", "libgcc_s"}));
  EXPECT_EQ(t.reference_source, kReference);
  EXPECT_EQ(t.starter_source, kStarter);
}

TEST_F(TaskLoadTest, OptionalFieldsAreRead) {
  json patch = {
      {"threads", 4},
      {"trials", 5},
      {"compile_flags", json::array({"-O2", "-ffast-math"})},
      {"policy", {{"allowed_headers", json::array({"random"})}, {"allowed_libraries", json::array({"libc"})}}},
      {"outputs", json::parse(R"([{"name": "y", "dtype": "float64", "shape": ["R", 2],
                                             "tolerance": {"atol": 0, "rtol": 0}}])")}};
  const fs::path dir = WritePatched("optional", patch);
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->threads, 4);
  EXPECT_EQ(r.task->trials, 5);
  EXPECT_EQ(r.task->compile_flags, (std::vector<std::string>{"-O2", "-ffast-math"}));
  EXPECT_EQ(r.task->policy.extra_allowed_headers, (std::vector<std::string>{"random"}));
  EXPECT_EQ(r.task->policy.allowed_libraries, (std::vector<std::string>{"libc"}));
  // An output may demand exact results (its own tolerance overrides the task's).
  EXPECT_EQ(r.task->outputs[0].tolerance.atol, 0);
  EXPECT_EQ(r.task->outputs[0].tolerance.rtol, 0);
}

TEST_F(TaskLoadTest, CustomReferenceAndStarterFileNames) {
  json task = ValidTaskJson("tst/names");
  task["reference"] = "ref_impl.py";
  task["starter"] = "naive.cpp";
  const fs::path dir = Write("names", task, /*with_reference=*/false, /*with_starter=*/false);
  WriteText(dir / "ref_impl.py", kReference);
  WriteText(dir / "naive.cpp", kStarter);
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->reference_source, kReference);
  EXPECT_EQ(r.task->starter_source, kStarter);
}

TEST_F(TaskLoadTest, MissingRequiredTopLevelField) {
  for (const char* field :
       {"category", "description", "sizes", "inputs", "outputs", "tolerance", "flops", "bytes", "signature"}) {
    SCOPED_TRACE(field);
    const std::string name = std::string("missing_") + field;
    ExpectError(WritePatched(name, {{field, nullptr}}), field, "is required");
  }
  json no_id = ValidTaskJson("tst/missing_id");
  no_id.erase("id");
  ExpectError(Write("missing_id", no_id), "id", "is required");
}

TEST_F(TaskLoadTest, MissingNestedField) {
  json task = ValidTaskJson("tst/nested_init");
  task["inputs"][0].erase("init");
  ExpectError(Write("nested_init", task), "inputs[0].init", "is required");

  task = ValidTaskJson("tst/nested_dtype");
  task["inputs"][1].erase("dtype");
  ExpectError(Write("nested_dtype", task), "inputs[1].dtype", "is required");

  task = ValidTaskJson("tst/nested_shape");
  task["outputs"][0].erase("shape");
  ExpectError(Write("nested_shape", task), "outputs[0].shape", "is required");

  task = ValidTaskJson("tst/nested_std");
  task["inputs"][0]["init"].erase("std");
  ExpectError(Write("nested_std", task), "inputs[0].init.std", "is required");

  task = ValidTaskJson("tst/nested_value");
  task["sizes"][1].erase("value");
  ExpectError(Write("nested_value", task), "sizes[1].value", "is required");

  task = ValidTaskJson("tst/nested_rtol");
  task["tolerance"].erase("rtol");
  ExpectError(Write("nested_rtol", task), "tolerance.rtol", "is required");
}

TEST_F(TaskLoadTest, WrongDtype) {
  json task = ValidTaskJson("tst/dtype_in");
  task["inputs"][0]["dtype"] = "float16";
  ExpectError(Write("dtype_in", task), "inputs[0].dtype", "float16");

  task = ValidTaskJson("tst/dtype_out");
  task["outputs"][0]["dtype"] = "bfloat16";
  ExpectError(Write("dtype_out", task), "outputs[0].dtype", "bfloat16");

  task = ValidTaskJson("tst/dtype_num");
  task["inputs"][0]["dtype"] = 32;
  ExpectError(Write("dtype_num", task), "inputs[0].dtype", "non-empty string");

  task = ValidTaskJson("tst/dtype_case");
  task["inputs"][0]["dtype"] = "Float32";
  ExpectError(Write("dtype_case", task), "inputs[0].dtype", "Float32");
}

TEST_F(TaskLoadTest, UnknownSizeNameInShape) {
  json task = ValidTaskJson("tst/unknown_size");
  task["inputs"][0]["shape"] = json::array({"R", "Q"});
  ExpectError(Write("unknown_size", task), "inputs[0].shape", "'Q'");

  task = ValidTaskJson("tst/unknown_size_out");
  task["outputs"][0]["shape"] = json::array({"N"});
  ExpectError(Write("unknown_size_out", task), "outputs[0].shape", "'N'");
}

TEST_F(TaskLoadTest, BadShapes) {
  json task = ValidTaskJson("tst/zero_extent");
  task["inputs"][0]["shape"] = json::array({"R", 0});
  ExpectError(Write("zero_extent", task), "inputs[0].shape", "positive");

  task = ValidTaskJson("tst/neg_extent");
  task["outputs"][0]["shape"] = json::array({"R", -2});
  ExpectError(Write("neg_extent", task), "outputs[0].shape", "positive");

  task = ValidTaskJson("tst/empty_shape");
  task["inputs"][0]["shape"] = json::array();
  ExpectError(Write("empty_shape", task), "inputs[0].shape", "non-empty array");

  task = ValidTaskJson("tst/float_extent");
  task["inputs"][0]["shape"] = json::array({"R", 2.5});
  ExpectError(Write("float_extent", task), "inputs[0].shape");
}

// Found by tests/fuzz/task_loader_fuzzer (UBSan): extents whose product overflows int64 were
// undefined behavior in TensorSpec::NumElements, and tensors holding more than int64 bytes
// together were cast to int64 for the `bytes` message.
TEST_F(TaskLoadTest, ShapesPastA64BitByteCountAreRefused) {
  json task = ValidTaskJson("tst/huge_shape");
  task["inputs"][0]["shape"] = json::array({int64_t{1} << 32, int64_t{1} << 32});
  ExpectError(Write("huge_shape", task), "inputs[0].shape", "64-bit byte count");

  task = ValidTaskJson("tst/huge_total");
  for (const char* name : {"z0", "z1", "z2"})  // 2^62 bytes each: allowed alone, 1.5 * 2^63 together
    task["inputs"].push_back({{"name", name}, {"dtype", "float64"}, {"shape", {int64_t{1} << 30, int64_t{1} << 29}},
                              {"init", {{"kind", "normal"}, {"mean", 0}, {"std", 1}}}});
  task["bytes"] = 1e30;
  ExpectError(Write("huge_total", task), "bytes", "more than the inputs and outputs hold (13835058055282163712)");
}

TEST_F(TaskLoadTest, SignatureMismatch) {
  const std::string expected = "void kernel(const float* x, const int64_t* idx, double* y, int64_t R, int64_t C)";
  for (const std::string& wrong : {
           std::string("void kernel(const float* x, const int64_t* idx, double* y, int64_t C, int64_t R)"),
           std::string("void kernel(const float* x, const int32_t* idx, double* y, int64_t R, int64_t C)"),
           std::string("void kernel(float* x, const int64_t* idx, double* y, int64_t R, int64_t C)"),
           std::string("void kernel(const float *x, const int64_t *idx, double *y, int64_t R, int64_t C)"),
           std::string("void kernel(const float* x, const int64_t* idx, double* y, int64_t R)"),
           std::string("int kernel(const float* x, const int64_t* idx, double* y, int64_t R, int64_t C)"),
       }) {
    SCOPED_TRACE(wrong);
    ExpectError(WritePatched("sig", {{"signature", wrong}}), "signature", expected);
  }
}

TEST_F(TaskLoadTest, IdNotMatchingFolder) {
  ExpectError(WritePatched("folder_a", {{"id", "tst/folder_b"}}), "id", "'tst/folder_a'");
  ExpectError(WritePatched("folder_c", {{"id", "other/folder_c"}}), "id", "'tst/folder_c'");
  ExpectError(WritePatched("folder_d", {{"id", "folder_d"}}), "id", "'tst/folder_d'");
}

TEST_F(TaskLoadTest, InvalidJson) {
  const std::string text = ValidTaskJson("tst/bad_json").dump(2);
  const fs::path truncated = WriteRaw("bad_json", text.substr(0, text.size() / 2));
  TaskLoadResult r = LoadTask(truncated);
  EXPECT_FALSE(r.task.has_value());
  EXPECT_EQ(r.error.rfind((truncated / "task.json").string() + ": ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("not valid JSON"), std::string::npos) << r.error;

  const fs::path trailing_comma = WriteRaw("bad_json2", R"({"id": "tst/bad_json2", "category": "x",})");
  r = LoadTask(trailing_comma);
  EXPECT_FALSE(r.task.has_value());
  EXPECT_EQ(r.error.rfind((trailing_comma / "task.json").string() + ": ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("not valid JSON"), std::string::npos) << r.error;
}

// Found by tests/fuzz/task_loader_fuzzer: a number past a double's range makes nlohmann throw
// out_of_range, not parse_error, and it escaped LoadTask (std::terminate).
TEST_F(TaskLoadTest, ANumberPastADoublesRangeIsInvalidJson) {
  std::string text = ValidTaskJson("tst/huge_number").dump(2);
  text.replace(text.find("\"flops\": 64"), 11, "\"flops\": 1e400");
  const fs::path dir = WriteRaw("huge_number", text);
  const TaskLoadResult r = LoadTask(dir);
  EXPECT_FALSE(r.task.has_value());
  EXPECT_EQ(r.error.rfind((dir / "task.json").string() + ": not valid JSON", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("1e400"), std::string::npos) << r.error;
}

TEST_F(TaskLoadTest, MissingTaskJsonNamesTheFile) {
  const fs::path dir = tmp_.path() / "tst" / "empty_folder";
  fs::create_directories(dir);
  const TaskLoadResult r = LoadTask(dir);
  EXPECT_FALSE(r.task.has_value());
  EXPECT_EQ(r.error.rfind((dir / "task.json").string() + ": ", 0), 0u) << r.error;
}

TEST_F(TaskLoadTest, RandIntWithASingleValue) {
  json task = ValidTaskJson("tst/randint_one");
  task["inputs"][1]["init"] = {{"kind", "randint"}, {"low", 3}, {"high", 4}};
  ExpectError(Write("randint_one", task), "inputs[1].init", "single value");

  task = ValidTaskJson("tst/randint_empty");
  task["inputs"][1]["init"] = {{"kind", "randint"}, {"low", 3}, {"high", 3}};
  ExpectError(Write("randint_empty", task), "inputs[1].init.high", "greater than low");

  task = ValidTaskJson("tst/randint_two");  // two values is the smallest non-degenerate range
  task["inputs"][1]["init"] = {{"kind", "randint"}, {"low", 3}, {"high", 5}};
  const TaskLoadResult r = LoadTask(Write("randint_two", task));
  EXPECT_TRUE(r.task.has_value()) << r.error;
}

TEST_F(TaskLoadTest, NormalStdMustBePositive) {
  for (double std_value : {0.0, -1.0}) {
    SCOPED_TRACE(std_value);
    json task = ValidTaskJson("tst/std");
    task["inputs"][0]["init"]["std"] = std_value;
    ExpectError(Write("std", task), "inputs[0].init.std", "> 0");
  }
}

TEST_F(TaskLoadTest, UniformHighMustExceedLow) {
  json task = ValidTaskJson("tst/uniform");
  task["inputs"][0]["init"] = {{"kind", "uniform"}, {"low", 1.0}, {"high", 1.0}};
  ExpectError(Write("uniform", task), "inputs[0].init.high", "greater than low");
}

TEST_F(TaskLoadTest, InitializerMustMatchDtype) {
  json task = ValidTaskJson("tst/randint_float");
  task["inputs"][0]["init"] = {{"kind", "randint"}, {"low", 0}, {"high", 10}};
  ExpectError(Write("randint_float", task), "inputs[0].init.kind", "integer dtypes");

  task = ValidTaskJson("tst/normal_int");
  task["inputs"][1]["init"] = {{"kind", "normal"}, {"mean", 0}, {"std", 1}};
  ExpectError(Write("normal_int", task), "inputs[1].init.kind", "randint");

  task = ValidTaskJson("tst/unknown_kind");
  task["inputs"][0]["init"] = {{"kind", "gaussian"}, {"mean", 0}, {"std", 1}};
  ExpectError(Write("unknown_kind", task), "inputs[0].init.kind", "gaussian");
}

TEST_F(TaskLoadTest, UniformStep) {
  json task = ValidTaskJson("tst/grid");
  task["inputs"][0]["init"] = {{"kind", "uniform"}, {"low", -1.0}, {"high", 1.0}, {"step", 0.25}};
  const TaskLoadResult r = LoadTask(Write("grid", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->inputs[0].init->step, 0.25);
  task["inputs"][0]["init"]["step"] = 0;
  ExpectError(Write("grid", task), "inputs[0].init.step", "> 0");
  task["inputs"][0]["init"]["step"] = 1.5;
  ExpectError(Write("grid", task), "inputs[0].init.step", "fewer than two values");
}

TEST_F(TaskLoadTest, PermutationAndPartitionInitializers) {
  // idx is int64 [R] with R = 4.
  json task = ValidTaskJson("tst/perm");
  task["inputs"][1]["init"] = {{"kind", "permutation"}};
  TaskLoadResult r = LoadTask(Write("perm", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->inputs[1].init->kind, Initializer::Kind::kPermutation);
  EXPECT_EQ(r.task->inputs[1].init->b, 4);  // high defaults to the element count

  task = ValidTaskJson("tst/perm_pool");
  task["inputs"][1]["init"] = {{"kind", "permutation"}, {"high", "C"}};  // a size name: 8
  r = LoadTask(Write("perm_pool", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->inputs[1].init->b, 8);

  task = ValidTaskJson("tst/perm_huge");
  task["inputs"][1]["init"] = {{"kind", "permutation"}, {"high", int64_t{1} << 40}};
  ExpectError(Write("perm_huge", task), "inputs[1].init.high", "2^26");

  task = ValidTaskJson("tst/perm_small");
  task["inputs"][1]["init"] = {{"kind", "permutation"}, {"high", 3}};
  ExpectError(Write("perm_small", task), "inputs[1].init.high", "distinct");

  task = ValidTaskJson("tst/part");
  task["inputs"][1]["init"] = {{"kind", "partition"}, {"total", "C"}};
  r = LoadTask(Write("part", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->inputs[1].init->kind, Initializer::Kind::kPartition);
  EXPECT_EQ(r.task->inputs[1].init->b, 8);

  task = ValidTaskJson("tst/part_missing");
  task["inputs"][1]["init"] = {{"kind", "partition"}};
  ExpectError(Write("part_missing", task), "inputs[1].init.total", "required");

  task = ValidTaskJson("tst/part_unknown");
  task["inputs"][1]["init"] = {{"kind", "partition"}, {"total", "Q"}};
  ExpectError(Write("part_unknown", task), "inputs[1].init.total", "unknown size 'Q'");

  task = ValidTaskJson("tst/part_float");
  task["inputs"][0]["init"] = {{"kind", "partition"}, {"total", 8}};
  ExpectError(Write("part_float", task), "inputs[0].init.kind", "integer dtypes");
}

// ---- check_sizes and ResolveShapes ------------------------------------------------------------

TEST_F(TaskLoadTest, CheckSizesAreReadInTheTasksSizeOrder) {
  json task = ValidTaskJson("tst/checks");
  task["check_sizes"] = json::parse(R"([{"C": 5, "R": 3}, {"R": 2, "C": 8}])");
  const TaskLoadResult r = LoadTask(Write("checks", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  ASSERT_EQ(r.task->check_sizes.size(), 2u);
  EXPECT_EQ(r.task->check_sizes[0], (std::vector<SizeParam>{{"R", 3}, {"C", 5}}));
  EXPECT_EQ(r.task->check_sizes[1], (std::vector<SizeParam>{{"R", 2}, {"C", 8}}));
}

TEST_F(TaskLoadTest, EveryTaskWithACpuVersionNeedsACheckSet) {
  json task = ValidTaskJson("tst/no_checks");
  task.erase("check_sizes");
  ExpectError(Write("no_checks", task), "check_sizes", "is required");
  ExpectError(WritePatched("empty_checks", {{"check_sizes", json::array()}}), "check_sizes", "at least one");
  ExpectError(WritePatched("checks_object", {{"check_sizes", {{"R", 3}, {"C", 5}}}}), "check_sizes", "array");
}

TEST_F(TaskLoadTest, BadCheckSetsNameTheSetAndTheSize) {
  auto checks = [](const char* text) { return json{{"check_sizes", json::parse(text)}}; };
  ExpectError(WritePatched("check_number", checks("[3]")), "check_sizes[0]", "object");
  ExpectError(WritePatched("check_unknown", checks(R"([{"R": 3, "C": 5, "Q": 2}])")), "check_sizes[0].Q",
              "not a size of the task");
  ExpectError(WritePatched("check_missing", checks(R"([{"R": 3}])")), "check_sizes[0]", "lacks size 'C'");
  for (const char* value : {"0", "-2", "2.5", "\"3\""}) {
    SCOPED_TRACE(value);
    ExpectError(WritePatched("check_value", checks((std::string(R"([{"R": 3, "C": )") + value + "}]").c_str())),
                "check_sizes[0].C", "positive integer");
  }
  ExpectError(WritePatched("check_timed", checks(R"([{"R": 4, "C": 8}])")), "check_sizes[0]", "is the timed sizes");
  ExpectError(WritePatched("check_twice", checks(R"([{"R": 3, "C": 5}, {"C": 5, "R": 3}])")), "check_sizes[1]",
              "repeats check_sizes[0]");
  // A check set is for correctness only: it may not cost more than the timed one.
  ExpectError(WritePatched("check_big", checks(R"([{"R": 4, "C": 9}])")), "check_sizes[0]",
              "more than at the timed sizes (224)");
}

TEST_F(TaskLoadTest, ACheckSetMustKeepTheInitializersValid) {
  // idx is a permutation drawn from a pool of C values: at R=6, C=5 the pool is too small for
  // six distinct values. The error names the set, the field, and the sizes.
  json task = ValidTaskJson("tst/check_pool");
  task["inputs"][1]["init"] = {{"kind", "permutation"}, {"high", "C"}};
  task["check_sizes"] = json::parse(R"([{"R": 3, "C": 5}, {"R": 6, "C": 5}])");
  const fs::path dir = Write("check_pool", task);
  ExpectError(dir, "check_sizes[1]: inputs[1].init.high", "distinct");
  EXPECT_NE(LoadTask(dir).error.find("(at R=6, C=5)"), std::string::npos) << LoadTask(dir).error;

  // A randint bound that names a size follows it; one value left is a constant input.
  task = ValidTaskJson("tst/check_randint");
  task["inputs"][1]["init"] = {{"kind", "randint"}, {"low", 0}, {"high", "R"}};
  task["check_sizes"] = json::parse(R"([{"R": 1, "C": 8}])");
  ExpectError(Write("check_randint", task), "check_sizes[0]: inputs[1].init", "single value");
  task["check_sizes"] = json::parse(R"([{"R": 2, "C": 8}])");
  const TaskLoadResult ok = LoadTask(Write("check_randint", task));
  ASSERT_TRUE(ok.task.has_value()) << ok.error;
  EXPECT_EQ(ok.task->inputs[1].init->b, 4);  // R at the timed sizes

  // Element counts stay within what a 64-bit byte count holds.
  task = ValidTaskJson("tst/check_huge");
  task["check_sizes"] = json::parse(R"([{"R": 3, "C": 4611686018427387904}])");
  ExpectError(Write("check_huge", task), "check_sizes[0]: inputs[0].shape", "64-bit byte count");
}

TEST_F(TaskLoadTest, RandIntBoundsMayNameASize) {
  json task = ValidTaskJson("tst/randint_size");
  task["inputs"][1]["init"] = {{"kind", "randint"}, {"low", 1}, {"high", "C"}};
  const TaskLoadResult r = LoadTask(Write("randint_size", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->inputs[1].init->a, 1);
  EXPECT_EQ(r.task->inputs[1].init->b, 8);
  EXPECT_EQ(r.task->inputs[1].init->b_size, "C");
  task["inputs"][1]["init"]["high"] = "Q";
  ExpectError(Write("randint_size", task), "inputs[1].init.high", "unknown size 'Q'");
}

TEST_F(TaskLoadTest, ResolveShapesReResolvesShapesAndSizeBoundInitializers) {
  json task = ValidTaskJson("tst/resolve");
  task["inputs"][1]["init"] = {{"kind", "partition"}, {"total", "C"}};
  task["inputs"].push_back(json::parse(R"({"name": "perm", "dtype": "int32", "shape": ["C", "R"],
                                           "init": {"kind": "permutation"}})"));
  task["signature"] = "void kernel(const float* x, const int64_t* idx, const int32_t* perm, double* y, int64_t R, int64_t C)";
  task["outputs"][0]["tolerance"] = {{"atol", 0.5}, {"rtol", 0.25}};
  const TaskLoadResult r = LoadTask(Write("resolve", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const Task& t = *r.task;

  const ShapeSet set = ResolveShapes(t, {{"C", 5}, {"R", 3}});  // any order in, task order out
  EXPECT_EQ(set.sizes, (std::vector<SizeParam>{{"R", 3}, {"C", 5}}));
  ASSERT_EQ(set.inputs.size(), 3u);
  ASSERT_EQ(set.outputs.size(), 1u);
  EXPECT_EQ(set.inputs[0].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(set.inputs[0].init->kind, Initializer::Kind::kNormal);
  EXPECT_DOUBLE_EQ(set.inputs[0].init->b, 2.0);  // a literal stays
  EXPECT_EQ(set.inputs[1].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(set.inputs[1].init->b, 5);  // partition total: C
  EXPECT_EQ(set.inputs[2].dtype, DType::kInt32);
  EXPECT_EQ(set.inputs[2].shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(set.inputs[2].init->b, 15);  // permutation pool: its element count
  EXPECT_EQ(set.outputs[0].shape, (std::vector<int64_t>{3, 2}));  // the literal extent stays
  EXPECT_EQ(set.outputs[0].dtype, DType::kFloat64);
  EXPECT_EQ(set.outputs[0].tolerance.atol, 0.5);
  EXPECT_EQ(set.outputs[0].tolerance.rtol, 0.25);
  // The task itself is still at the timed sizes.
  EXPECT_EQ(t.inputs[2].shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(t.inputs[2].init->b, 32);

  // Resolving the timed sizes gives the task's own tensors.
  const ShapeSet timed = ResolveShapes(t, t.sizes);
  for (std::size_t i = 0; i < t.inputs.size(); ++i) {
    EXPECT_EQ(timed.inputs[i].shape, t.inputs[i].shape);
    EXPECT_EQ(timed.inputs[i].init->b, t.inputs[i].init->b);
  }

  // Sizes that are not a valid set for the task are a caller's bug: they throw, naming the size.
  auto throws = [&](const std::vector<SizeParam>& sizes, const std::string& what) {
    try {
      (void)ResolveShapes(t, sizes);
      ADD_FAILURE() << "no exception; wanted " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  throws({{"R", 3}}, "C: is missing");
  throws({{"R", 3}, {"C", 5}, {"Q", 1}}, "Q: is not a size of the task");
  throws({{"R", 3}, {"C", 0}}, "C: must be a positive integer");
  throws({{"R", 3}, {"C", 5}, {"R", 2}}, "R: is given twice");
  throws({{"R", 1}, {"C", 5}}, "inputs[1].init");  // a partition into one part
}

TEST_F(TaskLoadTest, CorrectnessShapeSetsAreTheTimedSetThenTheCheckSets) {
  json task = ValidTaskJson("tst/sets");
  task["check_sizes"] = json::parse(R"([{"R": 3, "C": 5}, {"R": 2, "C": 7}])");
  const TaskLoadResult r = LoadTask(Write("sets", task));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const std::vector<ShapeSet> sets = CorrectnessShapeSets(*r.task);
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0].sizes, r.task->sizes);
  EXPECT_EQ(sets[0].inputs[0].shape, r.task->inputs[0].shape);
  EXPECT_EQ(sets[0].outputs[0].shape, r.task->outputs[0].shape);
  EXPECT_EQ(sets[1].inputs[0].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(sets[2].inputs[0].shape, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(sets[2].outputs[0].shape, (std::vector<int64_t>{2, 2}));
}

TEST(ResolveShapes, ATensorMadeInCodeKeepsItsShape) {
  Task task;
  task.id = "code/made";
  task.sizes = {{"N", 4}};
  TensorSpec x;
  x.name = "x";
  x.shape = {4};
  x.init = Initializer{};
  task.inputs = {x};
  TensorSpec y = x;
  y.name = "y";
  y.init.reset();
  task.outputs = {y};
  const ShapeSet set = ResolveShapes(task, {{"N", 9}});
  EXPECT_EQ(set.sizes, (std::vector<SizeParam>{{"N", 9}}));
  EXPECT_EQ(set.inputs[0].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(CorrectnessShapeSets(task).size(), 1u);
}

TEST_F(TaskLoadTest, MissingReferenceFile) {
  ExpectError(Write("no_reference", ValidTaskJson("tst/no_reference"), /*with_reference=*/false), "reference",
              "reference.py");

  json task = ValidTaskJson("tst/no_custom_reference");
  task["reference"] = "custom_ref.py";
  ExpectError(Write("no_custom_reference", task), "reference", "custom_ref.py");
}

TEST_F(TaskLoadTest, ReferenceMustDefineReference) {
  const fs::path dir = Write("bad_reference", ValidTaskJson("tst/bad_reference"));
  WriteText(dir / "reference.py", "def ref(x: Tensor) -> Tensor:\n    return x\n");
  ExpectError(dir, "reference", "def reference(");
}

TEST_F(TaskLoadTest, NonStringFileNamesNameTheField) {
  ExpectError(WritePatched("ref_number", {{"reference", 5}}), "reference");
  ExpectError(WritePatched("starter_array", {{"starter", json::array({"a.cpp"})}}), "starter");
}

TEST_F(TaskLoadTest, MissingStarterFile) {
  ExpectError(Write("no_starter", ValidTaskJson("tst/no_starter"), true, /*with_starter=*/false), "starter",
              "starter.cpp");
}

TEST_F(TaskLoadTest, SizesValidation) {
  json task = ValidTaskJson("tst/size_zero");
  task["sizes"][0]["value"] = 0;
  ExpectError(Write("size_zero", task), "sizes[0].value", "positive integer");

  task = ValidTaskJson("tst/size_float");
  task["sizes"][1]["value"] = 8.5;
  ExpectError(Write("size_float", task), "sizes[1].value", "positive integer");

  task = ValidTaskJson("tst/size_dup");
  task["sizes"][1]["name"] = "R";
  ExpectError(Write("size_dup", task), "sizes[1].name", "duplicate");

  ExpectError(WritePatched("size_object", {{"sizes", {{"R", 4}}}}), "sizes", "array");
}

TEST_F(TaskLoadTest, TensorNamesMustBeUnique) {
  json task = ValidTaskJson("tst/dup_input");
  task["inputs"][1]["name"] = "x";
  ExpectError(Write("dup_input", task), "inputs[1].name", "duplicate");

  task = ValidTaskJson("tst/out_is_input");
  task["outputs"][0]["name"] = "x";
  ExpectError(Write("out_is_input", task), "outputs", "'x'");
}

TEST_F(TaskLoadTest, TensorListsMustBeNonEmpty) {
  ExpectError(WritePatched("no_inputs", {{"inputs", json::array()}}), "inputs", "non-empty array");
  ExpectError(WritePatched("no_outputs", {{"outputs", json::array()}}), "outputs", "non-empty array");
}

TEST_F(TaskLoadTest, ToleranceValidation) {
  ExpectError(WritePatched("tol_zero", {{"tolerance", {{"atol", 0}, {"rtol", 0}}}}), "tolerance", "both 0");
  ExpectError(WritePatched("tol_neg", {{"tolerance", {{"atol", -1e-5}, {"rtol", 1e-4}}}}), "tolerance", ">= 0");
  ExpectError(WritePatched("tol_str", {{"tolerance", {{"atol", "1e-5"}, {"rtol", 1e-4}}}}), "tolerance.atol", "number");
}

TEST_F(TaskLoadTest, FlopsAndBytesValidation) {
  ExpectError(WritePatched("neg_flops", {{"flops", -1}}), "flops", ">= 0");
  ExpectError(WritePatched("zero_bytes", {{"bytes", 0}}), "bytes", "> 0");
  ExpectError(WritePatched("too_many_bytes", {{"bytes", 225}}), "bytes", "more than the inputs and outputs hold (224)");
  const TaskLoadResult fewer = LoadTask(WritePatched("fewer_bytes", {{"bytes", 100}}));  // a kernel may skip some
  EXPECT_TRUE(fewer.task.has_value()) << fewer.error;
  ExpectError(WritePatched("str_flops", {{"flops", "64"}}), "flops", "number");
  const TaskLoadResult zero_flops = LoadTask(WritePatched("zero_flops", {{"flops", 0}}));  // e.g. a pure copy
  EXPECT_TRUE(zero_flops.task.has_value()) << zero_flops.error;
}

TEST_F(TaskLoadTest, ThreadsAndTrialsValidation) {
  ExpectError(WritePatched("threads0", {{"threads", 0}}), "threads", ">= 1");
  ExpectError(WritePatched("threads_str", {{"threads", "2"}}), "threads", ">= 1");
  ExpectError(WritePatched("trials2", {{"trials", 2}}), "trials", ">= 3");
}

TEST_F(TaskLoadTest, CompileFlagsValidation) {
  for (const char* flag : {"-o", "-ofoo", "-lm", "-L/tmp", "-Wl,-rpath,/tmp", "-B/tmp", "-I/tmp", "-include",
                           "-specs=/tmp/x", "-fplugin=/tmp/x.so", "O3", ""}) {
    SCOPED_TRACE(flag);
    ExpectError(WritePatched("flags", {{"compile_flags", json::array({flag})}}), "compile_flags", "not allowed");
  }
  ExpectError(WritePatched("flags_type", {{"compile_flags", "-O3"}}), "compile_flags", "array of strings");
  ExpectError(WritePatched("flags_elem", {{"compile_flags", json::array({"-O3", 3})}}), "compile_flags",
              "array of strings");
}

TEST_F(TaskLoadTest, PolicyValidation) {
  ExpectError(WritePatched("policy_arr", {{"policy", json::array({"random"})}}), "policy", "object");
  ExpectError(WritePatched("policy_hdr", {{"policy", {{"allowed_headers", "random"}}}}), "policy.allowed_headers",
              "array of strings");
  ExpectError(WritePatched("policy_lib", {{"policy", {{"allowed_libraries", json::array({1})}}}}),
              "policy.allowed_libraries", "array of strings");
}

// ---------------------------------------------------------------------------------------------
// Knobs: task.json's `knobs` and the template beside it.

const char* kTemplate =
    "#include <cstdint>\n"
    "extern \"C\" void kernel(const float* x, const int64_t* idx, double* y, int64_t R, int64_t C) {\n"
    "  for (int64_t r = 0; r < R; ++r) { double s = 0;\n"
    "    for (int64_t c = 0; c < C; c += BLOCK)\n"
    "      for (int64_t b = 0; b < BLOCK && c + b < C; ++b) s += x[r * C + c + b];\n"
    "    y[2 * r] = SCALE(s); y[2 * r + 1] = SCALE(s); }\n"
    "}\n";

json ValidKnobs() {
  return json::parse(R"JSON({
    "BLOCK": {"values": [1, 4, 8], "default": 4},
    "SCALE": {"values": ["+", "1.0 *"], "default": "+"}
  })JSON");
}

class TaskKnobsTest : public TaskLoadTest {
 protected:
  // A valid task with `knobs` (ValidKnobs() when null) and, unless told otherwise, template.cpp.
  fs::path WriteWithKnobs(const std::string& name, const json& knobs, bool with_template = true) {
    json task = ValidTaskJson("tst/" + name);
    task["knobs"] = knobs;
    const fs::path dir = Write(name, task);
    if (with_template) WriteText(dir / "template.cpp", kTemplate);
    return dir;
  }
  // ValidKnobs() with `patch` merged into it (RFC 7386).
  fs::path WriteKnobsPatched(const std::string& name, const json& patch) {
    json knobs = ValidKnobs();
    knobs.merge_patch(patch);
    return WriteWithKnobs(name, knobs);
  }
};

TEST_F(TaskKnobsTest, TasksWithoutKnobsHaveNone) {
  const TaskLoadResult r = LoadTask(Write("plain", ValidTaskJson("tst/plain")));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_TRUE(r.task->knobs.empty());
  EXPECT_TRUE(r.task->template_source.empty());
}

TEST_F(TaskKnobsTest, KnobsAndTemplateAreRead) {
  json knobs = ValidKnobs();
  knobs["SCALE"] = {{"values", json::array({"1.0 *", "2.0 *"})}, {"default", "1.0 *"}};
  const TaskLoadResult r = LoadTask(WriteWithKnobs("knobs", knobs));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const Task& t = *r.task;
  ASSERT_EQ(t.knobs.size(), 2u);
  EXPECT_EQ(t.knobs[0].name, "BLOCK");  // sorted by name
  EXPECT_EQ(t.knobs[0].values, (std::vector<Knob::Value>{int64_t{1}, int64_t{4}, int64_t{8}}));
  EXPECT_EQ(t.knobs[0].default_value, Knob::Value{int64_t{4}});
  EXPECT_EQ(t.knobs[1].name, "SCALE");
  EXPECT_EQ(t.knobs[1].values, (std::vector<Knob::Value>{std::string("1.0 *"), std::string("2.0 *")}));
  EXPECT_EQ(t.knobs[1].default_value, Knob::Value{std::string("1.0 *")});
  EXPECT_EQ(t.template_source, kTemplate);
  EXPECT_EQ(t.starter_source, kStarter);  // the starter stays what an episode starts from
}

TEST_F(TaskKnobsTest, CustomTemplateFileName) {
  json task = ValidTaskJson("tst/custom_template");
  task["knobs"] = ValidKnobs();
  task["template"] = "tuned.cpp";
  const fs::path dir = Write("custom_template", task);
  WriteText(dir / "tuned.cpp", kTemplate);
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_EQ(r.task->template_source, kTemplate);

  task["template"] = "../tuned.cpp";
  ExpectError(Write("custom_template", task), "template", "not a path");
}

TEST_F(TaskKnobsTest, KnobValueTextIsWhatTheDefineSays) {
  EXPECT_EQ(KnobValueText(Knob::Value{int64_t{-16}}), "-16");
  EXPECT_EQ(KnobValueText(Knob::Value{std::string("std::exp")}), "std::exp");
}

TEST_F(TaskKnobsTest, TheKnobsFieldMustBeANonEmptyObject) {
  ExpectError(WriteWithKnobs("knobs_array", json::array({"BLOCK"})), "knobs", "non-empty object");
  ExpectError(WriteWithKnobs("knobs_empty", json::object()), "knobs", "non-empty object");
  ExpectError(WriteKnobsPatched("knob_number", {{"BLOCK", 4}}), "knobs.BLOCK", "must be an object");
}

TEST_F(TaskKnobsTest, KnobNamesAreUpperCaseIdentifiersThatRewriteNothing) {
  for (const char* name : {"block", "Block", "1BLOCK", "_BLOCK", "BLOCK-SIZE", "BLÖCK"}) {
    SCOPED_TRACE(name);
    json knobs = ValidKnobs();
    knobs[name] = knobs["BLOCK"];
    ExpectError(WriteWithKnobs("knob_name", knobs), std::string("knobs.") + name, "UPPER_CASE");
  }
  json knobs = ValidKnobs();
  knobs["R"] = {{"values", json::array({1, 2})}, {"default", 1}};  // R is a size of the task
  ExpectError(WriteWithKnobs("knob_size", knobs), "knobs.R", "size name");
  const TaskLoadResult ok = LoadTask(WriteKnobsPatched("knob_digits", {{"BLOCK_2D", ValidKnobs()["BLOCK"]}}));
  EXPECT_FALSE(ok.task.has_value());  // valid name, but the template never uses BLOCK_2D
  EXPECT_NE(ok.error.find("knobs.BLOCK_2D: 'template.cpp' never uses it"), std::string::npos) << ok.error;
}

TEST_F(TaskKnobsTest, KnobFieldsAreChecked) {
  ExpectError(WriteKnobsPatched("knob_extra", {{"BLOCK", {{"step", 2}}}}), "knobs.BLOCK.step", "unknown field");
  ExpectError(WriteKnobsPatched("knob_no_values", {{"BLOCK", {{"values", nullptr}}}}), "knobs.BLOCK.values",
              "is required");
  ExpectError(WriteKnobsPatched("knob_no_default", {{"BLOCK", {{"default", nullptr}}}}), "knobs.BLOCK.default",
              "is required");
  ExpectError(WriteKnobsPatched("knob_values_empty", {{"BLOCK", {{"values", json::array()}}}}), "knobs.BLOCK.values",
              "non-empty array");
  ExpectError(WriteKnobsPatched("knob_values_scalar", {{"BLOCK", {{"values", 4}}}}), "knobs.BLOCK.values",
              "non-empty array");
}

TEST_F(TaskKnobsTest, KnobValuesAreIntegersOrStringsOfOneKind) {
  ExpectError(WriteKnobsPatched("mixed", {{"BLOCK", {{"values", json::array({1, "4"})}}}}), "knobs.BLOCK.values[1]",
              "must be an integer");
  ExpectError(WriteKnobsPatched("mixed_str", {{"SCALE", {{"values", json::array({"+", 2})}}}}), "knobs.SCALE.values[1]",
              "must be a string");
  ExpectError(WriteKnobsPatched("float", {{"BLOCK", {{"values", json::array({2.5, 4})}}}}), "knobs.BLOCK.values[0]",
              "an integer or a string");
  ExpectError(WriteKnobsPatched("bool", {{"BLOCK", {{"values", json::array({true, false})}}}}), "knobs.BLOCK.values[0]",
              "an integer or a string");
  ExpectError(WriteKnobsPatched("dup", {{"BLOCK", {{"values", json::array({4, 8, 4})}}}}), "knobs.BLOCK.values",
              "duplicate value 4");
  ExpectError(WriteKnobsPatched("newline", {{"SCALE", {{"values", json::array({"+", "+\n#include <cstdio>"})}}}}),
              "knobs.SCALE.values[1]", "one line");
  ExpectError(WriteKnobsPatched("backslash", {{"SCALE", {{"values", json::array({"+", "+ \\"})}}}}),
              "knobs.SCALE.values[1]", "backslash");
  ExpectError(WriteKnobsPatched("comment", {{"SCALE", {{"values", json::array({"+", "+ // x"})}}}}),
              "knobs.SCALE.values[1]", "comment");
}

TEST_F(TaskKnobsTest, TheDefaultIsOneOfTheValues) {
  ExpectError(WriteKnobsPatched("default_out", {{"BLOCK", {{"default", 16}}}}), "knobs.BLOCK.default",
              "16 is not one of the values (1, 4, 8)");
  ExpectError(WriteKnobsPatched("default_kind", {{"BLOCK", {{"default", "4"}}}}), "knobs.BLOCK.default",
              "must be an integer");
  ExpectError(WriteKnobsPatched("default_str", {{"SCALE", {{"default", "-"}}}}), "knobs.SCALE.default",
              "- is not one of the values (+, 1.0 *)");
}

TEST_F(TaskKnobsTest, KnobsNeedTheirTemplate) {
  ExpectError(WriteWithKnobs("no_template", ValidKnobs(), /*with_template=*/false), "template", "'template.cpp'");
  json task = ValidTaskJson("tst/template_alone");
  task["template"] = "template.cpp";
  ExpectError(Write("template_alone", task), "template", "no knobs");

  const fs::path dir = WriteWithKnobs("unused", ValidKnobs());
  WriteText(dir / "template.cpp", "// uses BLOCKS and SCALE_, not the knobs\n");
  ExpectError(dir, "knobs.BLOCK", "never uses it");
}

TEST(DType, NamesSizesAndKinds) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.has_value()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_EQ(DTypeName(DType::kInt64), "int64");
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_TRUE(IsFloating(DType::kFloat32));
  EXPECT_TRUE(IsFloating(DType::kFloat64));
  EXPECT_FALSE(IsFloating(DType::kInt32));
  EXPECT_FALSE(IsFloating(DType::kInt64));
  EXPECT_FALSE(ParseDType("float").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
}

TEST(TensorSpec, ElementsAndBytes) {
  TensorSpec t;
  t.dtype = DType::kFloat64;
  t.shape = {3, 5, 7};
  EXPECT_EQ(t.NumElements(), 105);
  EXPECT_EQ(t.NumBytes(), 840u);
  t.dtype = DType::kInt32;
  EXPECT_EQ(t.NumBytes(), 420u);
}

TensorSpec Spec(const std::string& name, DType dtype) {
  TensorSpec t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {1};
  return t;
}

TEST(ExpectedSignature, InputsThenOutputsThenSizesWithCTypes) {
  Task task;
  task.inputs = {Spec("a", DType::kFloat32), Spec("b", DType::kFloat64), Spec("c", DType::kInt32),
                 Spec("d", DType::kInt64)};
  task.outputs = {Spec("y", DType::kFloat32), Spec("z", DType::kInt64)};
  task.sizes = {{"N", 1}, {"M", 2}};
  EXPECT_EQ(ExpectedSignature(task),
            "void kernel(const float* a, const double* b, const int32_t* c, const int64_t* d, float* y, int64_t* z, "
            "int64_t N, int64_t M)");

  Task no_sizes;
  no_sizes.inputs = {Spec("x", DType::kFloat64)};
  no_sizes.outputs = {Spec("out", DType::kInt32)};
  EXPECT_EQ(ExpectedSignature(no_sizes), "void kernel(const double* x, int32_t* out)");
}

// ---------------------------------------------------------------------------------------------
// The registry.

TEST(TaskRegistry, KeepsGoodTasksAndReportsBadOnes) {
  TempDir tmp;
  const fs::path good = tmp.path() / "tst" / "good";
  WriteText(good / "task.json", ValidTaskJson("tst/good").dump());
  WriteText(good / "reference.py", kReference);
  WriteText(good / "starter.cpp", kStarter);
  const fs::path bad = tmp.path() / "tst" / "bad";
  json bad_task = ValidTaskJson("tst/bad");
  bad_task["inputs"][0]["dtype"] = "float16";
  WriteText(bad / "task.json", bad_task.dump());
  WriteText(bad / "reference.py", kReference);
  WriteText(bad / "starter.cpp", kStarter);
  fs::create_directories(tmp.path() / "tst" / "not_a_task");  // no task.json: skipped silently
  WriteText(tmp.path() / "README.md", "a file next to the suites is ignored\n");

  const TaskRegistry registry = TaskRegistry::LoadFrom(tmp.path());
  ASSERT_EQ(registry.All().size(), 1u);
  EXPECT_EQ(registry.All()[0]->id, "tst/good");
  ASSERT_NE(registry.Find("tst/good"), nullptr);
  EXPECT_EQ(registry.Find("tst/good")->dir, good);
  EXPECT_EQ(registry.Find("tst/bad"), nullptr);
  EXPECT_EQ(registry.Find("tst/not_a_task"), nullptr);
  ASSERT_EQ(registry.errors().size(), 1u);
  EXPECT_NE(registry.errors()[0].find((bad / "task.json").string()), std::string::npos) << registry.errors()[0];
  EXPECT_NE(registry.errors()[0].find("inputs[0].dtype"), std::string::npos) << registry.errors()[0];
}

TEST(TaskRegistry, MissingRootIsOneError) {
  TempDir tmp;
  const TaskRegistry registry = TaskRegistry::LoadFrom(tmp.path() / "does_not_exist");
  EXPECT_TRUE(registry.All().empty());
  ASSERT_EQ(registry.errors().size(), 1u);
  EXPECT_NE(registry.errors()[0].find("does_not_exist"), std::string::npos);
}

TEST(TaskRegistry, DefaultSuitesRootHonoursEnvironment) {
  const char* old = std::getenv("KERNELGYM_SUITES");
  const std::string saved = old ? old : "";
  ASSERT_EQ(setenv("KERNELGYM_SUITES", "/some/where/else", 1), 0);
  EXPECT_EQ(DefaultSuitesRoot(), fs::path("/some/where/else"));
  if (old)
    setenv("KERNELGYM_SUITES", saved.c_str(), 1);
  else
    unsetenv("KERNELGYM_SUITES");
  if (!old) {
    const fs::path root = DefaultSuitesRoot();  // the compiled-in source tree path
    EXPECT_TRUE(root.is_absolute()) << root;
    EXPECT_TRUE(fs::is_directory(root / "cpu")) << root;
  }
}

// ---------------------------------------------------------------------------------------------
// The bundled tasks.

const std::vector<std::string> kCpuTasks{"cpu/attention", "cpu/conv2d",   "cpu/gemm_bias_relu",
                                         "cpu/rms_norm",  "cpu/silu_mul", "cpu/softmax_rows"};

TEST(BundledTasks, TheSixCpuTasksLoad) {
  for (const std::string& id : kCpuTasks) {
    SCOPED_TRACE(id);
    const TaskLoadResult r = LoadTask(DefaultSuitesRoot() / id);
    ASSERT_TRUE(r.task.has_value()) << r.error;
    EXPECT_EQ(r.task->id, id);
    EXPECT_EQ(r.task->Suite(), "cpu");
  }
}

// JAXBench's 50 computations, by the names the MaxKernel paper evaluates on: 17 production
// kernels and 33 fused operators from KernelBench level 2. A policy's score on `jaxbench` is
// only comparable with others' when every one of them is here.
const std::vector<std::string> kJaxBenchProduction{
    "flash_attention", "gqa_attention", "mla_attention", "sparse_attention", "flex_attention",
    "paged_attention", "ragged_paged_attention", "gemm", "swiglu_mlp", "sparse_moe", "megablox_gmm",
    "rms_norm", "cross_entropy", "ragged_dot", "retnet_retention", "mamba2_ssd", "triangle_multiplication"};
const std::vector<std::string> kJaxBenchFused{
    "conv2d_relu_biasadd", "matmul_subtract_multiply_relu", "gemm_multiply_leakyrelu", "gemm_divide_sum_scaling",
    "conv2d_instancenorm_divide", "matmul_sum_max_avgpool_lse_lse", "matmul_scale_residualadd_clamp_lse_mish",
    "conv3d_groupnorm_mean", "bmm_instancenorm_sum_residualadd_multiply", "matmul_mish_mish",
    "convtranspose3d_layernorm_gelu_scaling", "matmul_swish_sum_groupnorm", "matmul_scaling_residualadd",
    "gemm_batchnorm_gelu_relu", "gemm_sigmoid_logsumexp", "conv3d_mish_tanh", "conv2d_activation_batchnorm",
    "gemm_scaling_hardtanh_gelu", "matmul_sigmoid_sum", "matmul_swish_scaling", "matmul_dropout_softmax",
    "conv2d_gelu_globalavgpool", "gemm_groupnorm_min_biasadd", "gemm_add_relu", "gemm_max_subtract_gelu",
    "gemm_batchnorm_scaling_softmax", "matmul_divide_gelu", "gemm_groupnorm_swish_multiply_swish",
    "conv2d_gn_tanh_hardswish_residual_lse", "matmul_add_swish_tanh_gelu_hardtanh",
    "matmul_batchnorm_biasadd_divide_swish", "matmul_avgpool_gelu_scale_max", "matmul_gelu_softmax"};

TEST(BundledTasks, JaxBenchHasAllFiftyModelsAtLeastSixAndFifteenTemplates) {
  const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  ASSERT_EQ(kJaxBenchProduction.size(), 17u);
  ASSERT_EQ(kJaxBenchFused.size(), 33u);
  for (const std::string& name : kJaxBenchProduction)
    EXPECT_NE(registry.Find("jaxbench-p/" + name), nullptr) << "jaxbench-p/" << name << " is missing";
  for (const std::string& name : kJaxBenchFused)
    EXPECT_NE(registry.Find("jaxbench-k/" + name), nullptr) << "jaxbench-k/" << name << " is missing";
  EXPECT_EQ(registry.InSuite("jaxbench-p").size(), 17u);
  EXPECT_EQ(registry.InSuite("jaxbench-k").size(), 33u);
  EXPECT_EQ(registry.InSuite("jaxbench").size(), 50u);
  EXPECT_GE(registry.InSuite("models").size(), 6u);
  const std::vector<std::string> suites = registry.SuiteNames();
  for (const char* name : {"cpu", "jaxbench-p", "jaxbench-k", "models", "jaxbench", "all"})
    EXPECT_NE(std::find(suites.begin(), suites.end(), name), suites.end()) << name;
  // Templated tasks: the discrete action space of learned policies and search.
  std::size_t templated = 0;
  for (const Task* t : registry.All()) templated += !t->knobs.empty();
  EXPECT_GE(templated, 15u);
}

TEST(BundledTasks, SoftmaxRowsMatchesTheDocumentedExample) {
  const TaskLoadResult r = LoadTask(DefaultSuitesRoot() / "cpu" / "softmax_rows");
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const Task& t = *r.task;
  EXPECT_EQ(t.signature, "void kernel(const float* x, float* y, int64_t R, int64_t C)");
  ASSERT_EQ(t.inputs.size(), 1u);
  EXPECT_EQ(t.inputs[0].shape, (std::vector<int64_t>{512, 1024}));
  ASSERT_TRUE(t.inputs[0].init.has_value());
  EXPECT_EQ(t.inputs[0].init->kind, Initializer::Kind::kNormal);
  EXPECT_DOUBLE_EQ(t.inputs[0].init->b, 3.0);
  EXPECT_DOUBLE_EQ(t.bytes, 4194304);
  // Its knob template (the knobs' behaviour is tested end to end in integration/knobs_test).
  ASSERT_EQ(t.knobs.size(), 3u);
  EXPECT_EQ(t.knobs[0].name, "EXP");
  EXPECT_EQ(t.knobs[0].default_value, Knob::Value{std::string("std::exp")});
  EXPECT_EQ(t.knobs[1].name, "RECOMPUTE");
  EXPECT_EQ(t.knobs[2].name, "SIMD");
  EXPECT_NE(t.template_source.find("extern \"C\" void kernel("), std::string::npos);
}

// Every task under DefaultSuitesRoot(), whatever suites exist: no load errors and the invariants the
// runner relies on.
TEST(TaskConformance, EveryBundledTaskSatisfiesTheInvariants) {
  const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  for (const std::string& error : registry.errors()) ADD_FAILURE() << "load error: " << error;
  const std::vector<const Task*> all = registry.All();
  ASSERT_FALSE(all.empty());
  for (const std::string& id : kCpuTasks) EXPECT_NE(registry.Find(id), nullptr) << id << " is missing";

  for (const Task* task : all) {
    SCOPED_TRACE(task->id);
    EXPECT_EQ(task->signature, ExpectedSignature(*task));
    EXPECT_GE(task->flops, 0);

    double io_bytes = 0;
    for (const TensorSpec& t : task->inputs) io_bytes += static_cast<double>(t.NumBytes());
    for (const TensorSpec& t : task->outputs) io_bytes += static_cast<double>(t.NumBytes());
    // Compulsory traffic: all of the inputs and outputs, or less where a correct kernel may skip
    // part of an input (unused pages of a paged cache, positions past a length). Never more:
    // overstating it would raise the physical floor and flag honest kernels as implausible.
    EXPECT_GT(task->bytes, 0);
    EXPECT_LE(task->bytes, io_bytes) << "task " << task->id << " declares bytes=" << task->bytes
                                     << " but its inputs+outputs are only " << io_bytes << " bytes";

    EXPECT_TRUE(task->tolerance.atol > 0 || task->tolerance.rtol > 0) << "task tolerance is zero";
    for (const TensorSpec& out : task->outputs) {
      if (IsFloating(out.dtype)) {
        EXPECT_TRUE(out.tolerance.atol > 0 || out.tolerance.rtol > 0) << "output " << out.name << " has zero tolerance";
      }
      EXPECT_FALSE(out.init.has_value()) << out.name;
    }
    for (const TensorSpec& in : task->inputs) EXPECT_TRUE(in.init.has_value()) << in.name;

    // Correctness also runs at other sizes (a kernel that hard-codes the timed shape fails);
    // each set resolves, differs from the timed one and is no bigger.
    if (task->has_cpu_version) {
      EXPECT_GE(task->check_sizes.size(), 1u);
    }
    const std::vector<ShapeSet> sets = CorrectnessShapeSets(*task);
    EXPECT_EQ(sets.size(), 1 + task->check_sizes.size());
    for (std::size_t i = 1; i < sets.size(); ++i) {
      EXPECT_NE(sets[i].sizes, task->sizes);
      double set_bytes = 0;
      for (const auto* list : {&sets[i].inputs, &sets[i].outputs})
        for (const TensorSpec& t : *list) set_bytes += static_cast<double>(t.NumBytes());
      EXPECT_LE(set_bytes, io_bytes) << "check set " << i;
    }

    EXPECT_NE(task->starter_source.find("extern \"C\""), std::string::npos) << "starter lacks extern \"C\"";
    EXPECT_NE(task->starter_source.find("kernel("), std::string::npos) << "starter lacks kernel(";
    EXPECT_NE(task->reference_source.find("def reference("), std::string::npos);
    EXPECT_GE(task->threads, 1);
    EXPECT_GE(task->trials, 3);
    EXPECT_EQ(task->dir.filename().string(), task->id.substr(task->id.find('/') + 1));
  }
}

}  // namespace
}  // namespace kernelgym

// ---- pallas/ (datasets/variants.h) ------------------------------------------------------------

namespace kernelgym {
namespace {

class PallasVariantTest : public TaskLoadTest {
 protected:
  fs::path WriteWithPallas(const std::string& name, const std::string& pallas_json, bool with_starter = true) {
    const fs::path dir = Write(name, ValidTaskJson("tst/" + name));
    WriteText(dir / "pallas" / "pallas.json", pallas_json);
    WriteText(dir / "pallas" / "reference.py", "def reference(x, idx):\n    return x\n");
    if (with_starter) WriteText(dir / "pallas" / "starter.py", "def kernel(x, idx):\n    return x\n");
    return dir;
  }
  // The load fails with "<dir>/pallas/<file>: ..." containing `what`.
  static void ExpectPallasError(const fs::path& dir, const std::string& file, const std::string& what) {
    const TaskLoadResult r = LoadTask(dir);
    EXPECT_FALSE(r.task.has_value());
    EXPECT_EQ(r.error.rfind((dir / "pallas" / file).string(), 0), 0u) << r.error;
    EXPECT_NE(r.error.find(what), std::string::npos) << r.error << "\nwanted: " << what;
  }
};

// pallas.json's three size sets, with `extra` fields appended.
std::string PallasJson(const std::string& extra = "") {
  return R"({"sizes": {"small": {"R": 8, "C": 128}, "check": {"R": 16, "C": 192}, "full": {"C": 4096, "R": 1024}})" +
         extra + "}";
}

TEST_F(PallasVariantTest, AVariantLoadsWithItsSizeSetsAndStarter) {
  const fs::path dir = WriteWithPallas("with_pallas", PallasJson());
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_TRUE(r.task->Supports("cpu"));
  EXPECT_TRUE(r.task->Supports("pallas"));
  EXPECT_EQ(r.task->StarterFor("pallas"), "def kernel(x, idx):\n    return x\n");
  EXPECT_EQ(r.task->StarterFor("cpu"), r.task->starter_source);
  const BackendVariant& v = r.task->variants.at("pallas");
  ASSERT_EQ(v.size_sets.size(), 3u);
  EXPECT_EQ(v.size_sets[1].first, "check");
  EXPECT_EQ(v.size_sets[2].first, "full");
  ASSERT_EQ(v.size_sets[2].second.size(), 2u);
  EXPECT_EQ(v.size_sets[2].second[0].name, "R") << "task.json's order, whatever pallas.json's";
  EXPECT_EQ(v.size_sets[2].second[0].value, 1024);
  EXPECT_TRUE(v.dtypes.empty());
  EXPECT_EQ(v.DTypeOf(r.task->inputs[0]), "float32") << "task.json's dtype where the version names none";
}

TEST_F(PallasVariantTest, AVariantMayGiveItsTensorsTpuDTypes) {
  const fs::path dir = WriteWithPallas(
      "bf16", PallasJson(R"(, "inputs": {"x": {"dtype": "bfloat16"}, "idx": {"dtype": "int8", "init": {"kind": "randint", "low": 0, "high": 8}}},
                           "outputs": {"y": {"dtype": "bfloat16", "rounded": {"summed": 1, "scale": 2.0}}})"));
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const BackendVariant& v = r.task->variants.at("pallas");
  EXPECT_EQ(v.DTypeOf(r.task->inputs[0]), "bfloat16");
  EXPECT_EQ(v.DTypeOf(r.task->inputs[1]), "int8");
  EXPECT_EQ(v.DTypeOf(r.task->outputs[0]), "bfloat16");
  EXPECT_EQ(r.task->inputs[0].dtype, DType::kFloat32) << "the cpu version keeps task.json's dtype";
}

TEST_F(PallasVariantTest, DTypesOutsideTheListsAreRefused) {
  ExpectPallasError(WriteWithPallas("bad_in", PallasJson(R"(, "inputs": {"x": {"dtype": "float64"}})")), "pallas.json",
                    "inputs.x.dtype: must be one of float32, bfloat16");
  ExpectPallasError(WriteWithPallas("bad_out", PallasJson(R"(, "outputs": {"y": {"dtype": "int8"}})")), "pallas.json",
                    "outputs.y.dtype: must be one of");
  ExpectPallasError(WriteWithPallas("no_tensor", PallasJson(R"(, "inputs": {"z": {"dtype": "bfloat16"}})")),
                    "pallas.json", "inputs.z: not one of the task's inputs");
}

TEST_F(PallasVariantTest, WithoutTheFolderTheTaskIsNotOfferedOnPallas) {
  const TaskLoadResult r = LoadTask(Write("cpu_only", ValidTaskJson("tst/cpu_only")));
  ASSERT_TRUE(r.task.has_value()) << r.error;
  EXPECT_FALSE(r.task->Supports("pallas"));
  EXPECT_TRUE(r.task->Supports("null"));
}

TEST_F(PallasVariantTest, BadPallasFoldersNameTheFileAndField) {
  ExpectPallasError(WriteWithPallas("no_full", R"({"sizes": {"small": {"R": 8, "C": 128}, "check": {"R": 16, "C": 8}}})"),
                    "pallas.json", "sizes.full: is required");
  ExpectPallasError(WriteWithPallas("no_check", R"({"sizes": {"small": {"R": 8, "C": 128}, "full": {"R": 16, "C": 8}}})"),
                    "pallas.json", "sizes.check: is required");
  ExpectPallasError(WriteWithPallas("missing_size", R"({"sizes": {"small": {"R": 8}, "full": {"R": 8, "C": 128}}})"),
                    "pallas.json", "sizes.small: must give exactly the task's sizes");
  ExpectPallasError(WriteWithPallas("zero_size", R"({"sizes": {"small": {"R": 0, "C": 128}, "full": {"R": 8, "C": 128}}})"),
                    "pallas.json", "sizes.small.R: must be a positive integer");
  ExpectPallasError(WriteWithPallas("not_json", "{sizes"), "pallas.json", "not valid JSON");
  ExpectPallasError(WriteWithPallas("huge_number", R"({"sizes": {"small": {"R": 1e400}}})"), "pallas.json",
                    "not valid JSON");
  ExpectPallasError(WriteWithPallas("no_starter", PallasJson(), /*with_starter=*/false),
                    "starter.py", "cannot be read");
}

// pallas.json's `knobs` and template.py: the version's own template, whose string values reach
// Python as string literals, so only identifiers are admitted (a quote could end the literal).
TEST_F(PallasVariantTest, AVariantMayDeclareItsOwnKnobTemplate) {
  const fs::path dir = WriteWithPallas(
      "knobbed", PallasJson(R"(, "knobs": {"ROWS": {"values": [8, 16], "default": 8},
                                            "MODE": {"values": ["tile", "whole"], "default": "tile"}})"));
  WriteText(dir / "pallas" / "template.py", "def kernel(x, idx):\n    return x if MODE == 'tile' else x[:ROWS]\n");
  const TaskLoadResult r = LoadTask(dir);
  ASSERT_TRUE(r.task.has_value()) << r.error;
  const BackendVariant& v = r.task->variants.at("pallas");
  ASSERT_EQ(v.knobs.size(), 2u);
  EXPECT_EQ(v.knobs[0].name, "MODE") << "sorted by name";
  EXPECT_EQ(v.knobs[1].default_value, Knob::Value{int64_t{8}});
  EXPECT_NE(v.template_source.find("MODE == 'tile'"), std::string::npos);
  EXPECT_TRUE(r.task->knobs.empty()) << "the cpu version has no template of its own";
}

TEST_F(PallasVariantTest, KnobStringsThatAreNotIdentifiersAreRefused) {
  const std::string tmpl = "def kernel(x, idx):\n    return x if MODE else x\n";
  for (const std::string& value : {R"(a\" + __import__('os').getcwd() + \"b)", "tile whole", "1x", "a'b", "a.b"}) {
    SCOPED_TRACE(value);
    const fs::path dir =
        WriteWithPallas("bad_value", PallasJson(R"(, "knobs": {"MODE": {"values": [")" + value + R"("], "default": ")" +
                                                value + R"("}})"));
    WriteText(dir / "pallas" / "template.py", tmpl);
    ExpectPallasError(dir, "pallas.json", "knobs.MODE.values[0]: '");
  }
  const fs::path no_template =
      WriteWithPallas("no_template", PallasJson(R"(, "knobs": {"MODE": {"values": ["a"], "default": "a"}})"));
  ExpectPallasError(no_template, "pallas.json", "template: file 'template.py' cannot be read");
  const fs::path unused = WriteWithPallas("unused", PallasJson(R"(, "knobs": {"ROWS": {"values": [1], "default": 1}})"));
  WriteText(unused / "pallas" / "template.py", tmpl);
  ExpectPallasError(unused, "pallas.json", "knobs.ROWS: 'template.py' never uses it");
}

TEST_F(PallasVariantTest, AJaxBenchFolderLoadsAsAPallasOnlySuite) {
  const fs::path root = tmp_.path() / "benchmark";
  WriteText(root / "good" / "baseline.py",
            "CONFIG = {}\ndef create_inputs():\n    return ()\ndef workload():\n    return 0\n");
  WriteText(root / "no_workload" / "baseline.py", "CONFIG = {}\ndef create_inputs():\n    return ()\n");
  TaskRegistry registry = TaskRegistry::LoadFrom(tmp_.path() / "no_suites_here");
  registry.AddJaxBenchLayout(root, "ext");
  const Task* good = registry.Find("ext/good");
  ASSERT_NE(good, nullptr);
  EXPECT_FALSE(good->Supports("cpu"));
  EXPECT_TRUE(good->Supports("pallas"));
  EXPECT_NE(good->StarterFor("pallas").find("def kernel"), std::string::npos) << "the stub";
  EXPECT_EQ(registry.Find("ext/no_workload"), nullptr);
  bool named = false;
  for (const std::string& e : registry.errors()) named |= e.find("no_workload") != std::string::npos && e.find("def workload") != std::string::npos;
  EXPECT_TRUE(named) << "the case without workload() is an error naming it";
}

}  // namespace
}  // namespace kernelgym
