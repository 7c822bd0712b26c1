// Every registered task's reference, run directly (the harness's Reference, libtorch): it is
// deterministic, its outputs have a meaningful range (not constant, not within the tolerance of
// a constant), and changing any single input changes the output beyond the tolerance — so no
// input can be ignored by a kernel that still passes. Adding a task gets these checks for free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <span>

#include "datasets/suite.h"
#include "tpu_runner/correctness.h"
#include "tpu_runner/harness/reference.h"
#include "tpu_runner/inputs.h"

namespace kernelgym {
namespace {

const TaskRegistry& Registry() {
  static const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  return registry;
}

std::vector<std::string> TaskIds() {
  std::vector<std::string> ids;
  for (const Task* t : Registry().All()) ids.push_back(t->id);
  return ids;
}

using Buffers = std::vector<std::vector<std::byte>>;

class TaskReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    task_ = Registry().Find(GetParam());
    ASSERT_NE(task_, nullptr);
    for (std::size_t i = 0; i < task_->inputs.size(); ++i) {
      inputs_.emplace_back(task_->inputs[i].NumBytes());
      FillInput(task_->inputs[i], inputs_.back(), MixSeed(2026, i));
    }
    std::vector<std::span<std::byte>> views(inputs_.begin(), inputs_.end());
    std::string error;
    reference_ = Reference::Create(task_->reference_source, task_->threads, task_->inputs, task_->outputs, error);
    ASSERT_NE(reference_, nullptr) << error;
    reference_->BindInputs(0, views);
  }

  Buffers Run() {
    std::string error;
    EXPECT_TRUE(reference_->Run(0, error)) << error;
    Buffers out;
    for (const TensorSpec& spec : task_->outputs) out.emplace_back(spec.NumBytes());
    std::vector<std::span<std::byte>> views(out.begin(), out.end());
    reference_->TakeOutputs(views);
    return out;
  }

  // True when every output of `b` is within the task's tolerance of `a`.
  bool WithinTolerance(const Buffers& a, const Buffers& b) const {
    for (std::size_t o = 0; o < task_->outputs.size(); ++o)
      if (!OutputWithinTolerance(task_->outputs[o], a[o], b[o])) return false;
    return true;
  }

  const Task* task_ = nullptr;
  Buffers inputs_;
  std::unique_ptr<Reference> reference_;
};

TEST_P(TaskReferenceTest, IsDeterministic) {
  const Buffers first = Run();
  const Buffers second = Run();
  for (std::size_t o = 0; o < first.size(); ++o)
    EXPECT_EQ(std::memcmp(first[o].data(), second[o].data(), first[o].size()), 0) << task_->outputs[o].name;
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
  for (std::size_t i = 0; i < inputs_.size(); ++i) FillInput(task_->inputs[i], inputs_[i], MixSeed(4242, i));
  const Buffers second = Run();
  inputs_ = saved;
  for (std::size_t o = 0; o < first.size(); ++o) {
    const TensorSpec& spec = task_->outputs[o];
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
    FillInput(task_->inputs[i], inputs_[i], MixSeed(7, i));  // in place: the reference's view sees it
    EXPECT_FALSE(WithinTolerance(base, Run())) << "changing input '" << task_->inputs[i].name
                                               << "' leaves every output within tolerance";
    inputs_[i] = saved;
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, TaskReferenceTest, ::testing::ValuesIn(TaskIds()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)  // gtest names: letters, digits, '_'
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kernelgym
