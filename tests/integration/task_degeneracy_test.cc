// Every registered task must be one that only a correct kernel passes. Benchmarks in this field
// have shipped tasks whose outputs a kernel that writes zeros, does nothing or copies an input
// could pass; here, three such kernels are generated from each task's signature and run through
// the real runner, and each must be judged incorrect. Adding a task gets these checks for free.
#include <gtest/gtest.h>

#include <cctype>
#include <sstream>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

enum class Degenerate { kWritesZeros, kDoesNothing, kCopiesAnInput };

struct Case {
  std::string task;
  Degenerate kind;
};

std::string KindName(Degenerate kind) {
  switch (kind) {
    case Degenerate::kWritesZeros: return "writes_zeros";
    case Degenerate::kDoesNothing: return "does_nothing";
    case Degenerate::kCopiesAnInput: return "copies_an_input";
  }
  return "?";
}

// A kernel with the task's exact signature and a body that computes nothing.
std::string DegenerateKernel(const Task& task, Degenerate kind) {
  std::ostringstream body;
  for (const TensorSpec& out : task.outputs) {
    if (kind == Degenerate::kWritesZeros) {
      body << "  std::memset(" << out.name << ", 0, " << out.NumBytes() << ");\n";
    } else if (kind == Degenerate::kCopiesAnInput && !task.inputs.empty()) {
      const TensorSpec& in = task.inputs.front();
      body << "  std::memcpy(" << out.name << ", " << in.name << ", " << std::min(out.NumBytes(), in.NumBytes())
           << ");\n";
    }
  }
  return "#include <cstring>\n#include <cstdint>\nextern \"C\" " + ExpectedSignature(task) + " {\n" + body.str() +
         "}\n";
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const Task* t : Tasks().All())
    for (Degenerate kind : {Degenerate::kWritesZeros, Degenerate::kDoesNothing, Degenerate::kCopiesAnInput})
      cases.push_back({t->id, kind});
  return cases;
}

class TaskDegeneracyTest : public ::testing::TestWithParam<Case> {};

TEST_P(TaskDegeneracyTest, ADegenerateKernelIsIncorrect) {
  const Task* task = Tasks().Find(GetParam().task);
  ASSERT_NE(task, nullptr);
  EvalOptions options = FastOptions();
  options.run_timing = false;  // the verdict comes from correctness alone
  const std::string source = DegenerateKernel(*task, GetParam().kind);
  const EvalResult r = Cpu().Evaluate(*task, source, options);
  EXPECT_EQ(r.status, Status::kIncorrect) << StatusName(r.status) << ": " << r.message << "\n" << source;
}

INSTANTIATE_TEST_SUITE_P(Tasks, TaskDegeneracyTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.task + "_" + KindName(info.param.kind);
                           for (char& c : name)  // gtest names: letters, digits, '_'
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kernelgym::testing
