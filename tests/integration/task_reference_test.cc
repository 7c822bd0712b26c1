// Every registered task's reference, run directly (the harness's Reference, libtorch): it is
// deterministic, its outputs have a meaningful range (not constant, not within the tolerance of
// a constant), and changing any single input changes the output beyond the tolerance — so no
// input can be ignored by a kernel that still passes. Adding a task gets these checks for free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>

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

TEST_P(TaskReferenceTest, OutputsAreNotWithinToleranceOfAConstant) {
  const Buffers out = Run();
  for (std::size_t o = 0; o < out.size(); ++o) {
    const TensorSpec& spec = task_->outputs[o];
    if (spec.dtype != DType::kFloat32) continue;
    const float* v = reinterpret_cast<const float*>(out[o].data());
    const auto [lo, hi] = std::minmax_element(v, v + spec.NumElements());
    // A constant c passes where |x - c| <= atol + rtol * |x| for every x; the middle of the
    // range is the best such constant. It must fail somewhere.
    const float c = (*lo + *hi) / 2;
    Buffers constant = out;
    float* w = reinterpret_cast<float*>(constant[o].data());
    std::fill(w, w + spec.NumElements(), c);
    EXPECT_FALSE(OutputWithinTolerance(spec, out[o], constant[o]))
        << spec.name << " is within tolerance of the constant " << c << " (range " << *lo << " .. " << *hi << ")";
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
