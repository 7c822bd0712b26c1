// Honest optimized kernels must pass, and beat the naive starter they replace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

std::vector<std::string> AllCases() {
  std::vector<std::string> cases;
  for (const auto& entry : std::filesystem::directory_iterator(SourceDir() / "tests/honest"))
    if (entry.is_directory()) cases.push_back(entry.path().filename().string());
  std::sort(cases.begin(), cases.end());
  return cases;
}

class HonestTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HonestTest, PassesAndBeatsTheStarter) {
  const auto dir = SourceDir() / "tests/honest" / GetParam();
  const nlohmann::json expected = nlohmann::json::parse(ReadText(dir / "expected.json"));
  const Task* task = Tasks().Find(expected.at("task").get<std::string>());
  ASSERT_NE(task, nullptr);
  const EvalResult starter = Cpu().Evaluate(*task, task->starter_source, FastOptions());
  const EvalResult fast = Cpu().Evaluate(*task, ReadText(dir / "kernel.cpp"), FastOptions());
  ASSERT_EQ(starter.status, Status::kOk) << "starter: " << starter.message;
  ASSERT_EQ(fast.status, Status::kOk) << GetParam() << ": " << fast.message;
  ASSERT_TRUE(starter.timing && fast.timing);
  // Both speedups are against the same reference, so their ratio is optimized vs starter.
  const double gain = fast.timing->speedup / starter.timing->speedup;
  EXPECT_GT(gain, 1.0) << GetParam() << ": starter " << starter.timing->speedup << "x, optimized "
                       << fast.timing->speedup << "x over the reference";
  EXPECT_GT(fast.timing->speedup_ci_low, starter.timing->speedup_ci_high) << "the intervals must not overlap";
}

INSTANTIATE_TEST_SUITE_P(Kernels, HonestTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace kernelgym::testing
