// Every registered task's reference, run directly (the harness's Reference, libtorch): it is
// deterministic, its outputs have a meaningful range (not constant, not within the tolerance of
// a constant), and changing any single input changes the output beyond the tolerance — so no
// input can be ignored by a kernel that still passes. At the timed sizes and at each check set
// (task.json check_sizes): a check set where a constant passes would not catch a kernel that
// hard-codes the timed shape and writes anything elsewhere. Adding a task gets these checks for
// free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <unistd.h>

#include "core/subprocess.h"
#include "datasets/suite.h"
#include "tpu_runner/correctness.h"
#include "tpu_runner/cpu/harness/reference.h"
#include "tpu_runner/cpu/inputs.h"
#include "tpu_runner/pallas/pallas_backend.h"

namespace kernelgym {
namespace {

const TaskRegistry& Registry() {
  static const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  return registry;
}

// A task at one of its correctness shape sets: 0 the timed sizes, >= 1 a check set.
struct Case {
  std::string task;
  std::size_t set = 0;
};

std::vector<Case> Cases(bool check_sets) {
  std::vector<Case> cases;
  for (const Task* t : Registry().All()) {
    if (!check_sets) cases.push_back({t->id, 0});
    else
      for (std::size_t s = 1; s <= t->check_sizes.size(); ++s) cases.push_back({t->id, s});
  }
  return cases;
}

using Buffers = std::vector<std::vector<std::byte>>;

class TaskReferenceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    task_ = Registry().Find(GetParam().task);
    ASSERT_NE(task_, nullptr);
    std::vector<ShapeSet> sets = CorrectnessShapeSets(*task_);
    ASSERT_LT(GetParam().set, sets.size());
    set_ = std::move(sets[GetParam().set]);
    for (std::size_t i = 0; i < set_.inputs.size(); ++i) {
      inputs_.emplace_back(set_.inputs[i].NumBytes());
      FillInput(set_.inputs[i], inputs_.back(), MixSeed(2026, i));
    }
    std::vector<std::span<std::byte>> views(inputs_.begin(), inputs_.end());
    std::string error;
    reference_ = Reference::Create(task_->reference_source, task_->threads, set_.inputs, set_.outputs, error);
    ASSERT_NE(reference_, nullptr) << error;
    reference_->BindInputs(0, views);
  }

  Buffers Run() {
    std::string error;
    EXPECT_TRUE(reference_->Run(0, error)) << error;
    Buffers out;
    for (const TensorSpec& spec : set_.outputs) out.emplace_back(spec.NumBytes());
    std::vector<std::span<std::byte>> views(out.begin(), out.end());
    reference_->CopyOutputs(views);
    return out;
  }

  // True when every output of `b` is within the task's tolerance of `a`.
  bool WithinTolerance(const Buffers& a, const Buffers& b) const {
    for (std::size_t o = 0; o < set_.outputs.size(); ++o)
      if (!OutputWithinTolerance(set_.outputs[o], a[o], b[o])) return false;
    return true;
  }

  const Task* task_ = nullptr;
  ShapeSet set_;  // the sizes and tensors this case runs at
  Buffers inputs_;
  std::unique_ptr<Reference> reference_;
};

TEST_P(TaskReferenceTest, IsDeterministic) {
  const Buffers first = Run();
  const Buffers second = Run();
  for (std::size_t o = 0; o < first.size(); ++o)
    EXPECT_EQ(std::memcmp(first[o].data(), second[o].data(), first[o].size()), 0) << set_.outputs[o].name;
}

// A constant c passes an output where |x - c| <= atol + rtol * |x| for every x; the middle of
// the values' range is the best such constant. It must fail somewhere.
bool ConstantPasses(const TensorSpec& spec, const std::vector<std::span<const float>>& draws) {
  float lo = draws[0][0], hi = draws[0][0];
  for (const auto& v : draws)
    for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  const double c = (static_cast<double>(lo) + hi) / 2;
  for (const auto& v : draws)
    for (const double x : v)  // as the correctness check compares: in double, relative to the reference
      if (!(std::fabs(c - x) <= spec.tolerance.atol + spec.tolerance.rtol * std::fabs(x))) return false;
  return true;
}

TEST_P(TaskReferenceTest, OutputsAreNotWithinToleranceOfAConstant) {
  const Buffers first = Run();
  // A second draw of every input: correctness runs several trials with fresh inputs, so a
  // constant must also fail across draws — the only check a one-element output (a mean loss)
  // can have.
  const Buffers saved = inputs_;
  for (std::size_t i = 0; i < inputs_.size(); ++i) FillInput(set_.inputs[i], inputs_[i], MixSeed(4242, i));
  const Buffers second = Run();
  inputs_ = saved;
  for (std::size_t o = 0; o < first.size(); ++o) {
    const TensorSpec& spec = set_.outputs[o];
    if (spec.dtype != DType::kFloat32) continue;
    auto values = [&](const Buffers& b) {
      return std::span<const float>(reinterpret_cast<const float*>(b[o].data()), spec.NumElements());
    };
    if (spec.NumElements() > 1)
      EXPECT_FALSE(ConstantPasses(spec, {values(first)})) << spec.name << " is within tolerance of a constant";
    EXPECT_FALSE(ConstantPasses(spec, {values(first), values(second)}))
        << spec.name << " is within tolerance of one constant across two draws of the inputs";
  }
}

TEST_P(TaskReferenceTest, EveryInputChangesTheOutput) {
  const Buffers base = Run();
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<std::byte> saved = inputs_[i];
    FillInput(set_.inputs[i], inputs_[i], MixSeed(7, i));  // in place: the reference's view sees it
    EXPECT_FALSE(WithinTolerance(base, Run())) << "changing input '" << set_.inputs[i].name
                                               << "' leaves every output within tolerance";
    inputs_[i] = saved;
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.task + (info.param.set ? "_check" + std::to_string(info.param.set) : "");
  for (char& c : name)  // gtest names: letters, digits, '_'
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Tasks, TaskReferenceTest, ::testing::ValuesIn(Cases(false)), CaseName);
INSTANTIATE_TEST_SUITE_P(CheckSizes, TaskReferenceTest, ::testing::ValuesIn(Cases(true)), CaseName);

// Every task's Pallas version has its own reference, in JAX: it must compute what the TorchScript
// reference computes. Both run on the same inputs (drawn here, at task.json's sizes); one Python
// process (the pallas venv) runs every JAX reference; the outputs must agree within the task's
// tolerance. A translation slip in a JAX reference would otherwise become the Pallas task's truth.
TEST(JaxReferences, AgreeWithTheTorchReferences) {
  const PallasSettings pallas = DefaultPallasSettings();
  ASSERT_TRUE(std::filesystem::exists(pallas.python)) << "no pallas venv at " << pallas.python;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kernelgym-jaxref-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Expected {
    const Task* task;
    Buffers outputs;
  };
  std::vector<Expected> expected;
  nlohmann::json jobs = nlohmann::json::array();
  for (const Task* task : Registry().All()) {
    if (!task->variants.count("pallas") || task->variants.at("pallas").layout != "kernelgym") continue;
    nlohmann::json inputs = nlohmann::json::array();
    std::vector<std::vector<std::byte>> buffers;
    for (std::size_t i = 0; i < task->inputs.size(); ++i) {
      buffers.emplace_back(task->inputs[i].NumBytes());
      FillInput(task->inputs[i], buffers.back(), MixSeed(77, i));
      const std::filesystem::path file = dir / (std::to_string(expected.size()) + "_in" + std::to_string(i) + ".bin");
      std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(buffers.back().data()),
                                                  static_cast<std::streamsize>(buffers.back().size()));
      inputs.push_back({{"file", file.string()},
                        {"dtype", std::string(DTypeName(task->inputs[i].dtype))},
                        {"shape", task->inputs[i].shape}});
    }
    std::string error;
    auto reference = Reference::Create(task->reference_source, task->threads, task->inputs, task->outputs, error);
    ASSERT_NE(reference, nullptr) << task->id << ": " << error;
    std::vector<std::span<std::byte>> views(buffers.begin(), buffers.end());
    reference->BindInputs(0, views);
    ASSERT_TRUE(reference->Run(0, error)) << task->id << ": " << error;
    Buffers out;
    for (const TensorSpec& spec : task->outputs) out.emplace_back(spec.NumBytes());
    std::vector<std::span<std::byte>> out_views(out.begin(), out.end());
    reference->CopyOutputs(out_views);
    jobs.push_back({{"task_dir", task->dir.string()},
                    {"inputs", inputs},
                    {"out_prefix", (dir / (std::to_string(expected.size()) + "_out")).string()}});
    expected.push_back({task, std::move(out)});
  }
  ASSERT_FALSE(expected.empty());
  std::ofstream(dir / "jobs.json") << jobs.dump();

  SpawnOptions spawn;
  spawn.argv = {pallas.python.string(), "-m", "kernelgym_pallas.run_reference", (dir / "jobs.json").string()};
  spawn.env = {"PATH=/usr/bin:/bin", "HOME=/tmp", "PYTHONPATH=" + pallas.package_dir.string(), "JAX_PLATFORMS=cpu",
               "TF_CPP_MIN_LOG_LEVEL=2"};
  const ProcessResult run = RunProcess(spawn, 600);
  ASSERT_TRUE(run.ok()) << run.Describe(600) << "\n" << HeadLines(run.stderr_text, 20);
  std::istringstream lines(run.stdout_text);
  std::string line;
  std::size_t index = 0, compared = 0;
  for (; std::getline(lines, line) && index < expected.size(); ++index) {
    const nlohmann::json answer = nlohmann::json::parse(line);
    const Task& task = *expected[index].task;
    ASSERT_FALSE(answer.contains("error")) << task.id << ": the JAX reference failed: " << answer["error"];
    const nlohmann::json& outputs = answer.at("outputs");
    ASSERT_EQ(outputs.size(), task.outputs.size()) << task.id;
    for (std::size_t o = 0; o < task.outputs.size(); ++o) {
      const TensorSpec& spec = task.outputs[o];
      EXPECT_EQ(outputs[o].at("shape").get<std::vector<int64_t>>(), spec.shape) << task.id << " " << spec.name;
      std::ifstream in(outputs[o].at("file").get<std::string>(), std::ios::binary);
      std::vector<std::byte> actual(spec.NumBytes());
      in.read(reinterpret_cast<char*>(actual.data()), static_cast<std::streamsize>(actual.size()));
      ASSERT_EQ(outputs[o].at("dtype").get<std::string>(), DTypeName(spec.dtype)) << task.id << " " << spec.name;
      const OutputCheck check = CompareOutput(spec, expected[index].outputs[o], actual);
      EXPECT_TRUE(check.passed()) << task.id << " output " << spec.name << ": " << check.mismatches << " of "
                                  << check.elements << " outside tolerance; max abs error " << check.max_abs_error
                                  << ", first at flat index " << check.first_mismatch << ": torch " << check.expected
                                  << ", jax " << check.actual;
      ++compared;
    }
  }
  EXPECT_EQ(index, expected.size()) << "answers for " << index << " of " << expected.size() << " tasks";
  EXPECT_GE(compared, expected.size()) << "every task has at least one output";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace kernelgym
