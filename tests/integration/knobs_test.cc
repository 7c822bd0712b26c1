// Every task's knob template through the real cpu backend: its combinations of knob values
// (a covering sample, or all with KERNELGYM_KNOBS_FULL=1) compile and are correct, and the knobs
// change speed for real. Adding a task with knobs gets
// these checks for free.
#include "env/episode/knobs.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>

#include "eval_fixture.h"
#include "tpu_runner/cpu/harness_session.h"

namespace kernelgym::testing {
namespace {

// The combinations this run checks: all of them with KERNELGYM_KNOBS_FULL=1, else a covering
// sample (the defaults and one combination per value of the widest knob, which covers every value
// of every knob: 3-5 combinations, no random draws) — the product of 17 templates does not fit the
// CI's budget (with two random draws more, the GEMM templates' samples were the suite's slowest
// tests). bench/knob_sweep.py checks
// and times every combination, and `kernelgym train sweep` / PPO evaluated 426 of the 540
// settings for docs/learned.md without a failure.
std::vector<KnobCombination> CombinationsToCheck(const Task& task) {
  const char* full = std::getenv("KERNELGYM_KNOBS_FULL");
  if (full && std::string(full) == "1") return AllKnobCombinations(task);
  return CoveringKnobCombinations(task, 4, 2026);
}

std::vector<std::string> TasksWithKnobs() {
  std::vector<std::string> ids;
  for (const Task* t : Tasks().All())
    if (!t->knobs.empty()) ids.push_back(t->id);
  return ids;
}

class KnobsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KnobsTest, CombinationsCompileAndAreCorrect) {
  const Task* task = Tasks().Find(GetParam());
  ASSERT_NE(task, nullptr);
  // Each combination is a kernel to check (here or in the sweep): keep the domains small
  // (docs/task_format.md).
  EXPECT_LE(AllKnobCombinations(*task).size(), 64u);
  const std::vector<KnobCombination> combos = CombinationsToCheck(*task);
  EvalOptions options = FastOptions();
  options.run_timing = false;
  for (const KnobCombination& combo : combos) {
    SCOPED_TRACE(KnobCombinationText(combo));
    const EditOutcome out = ApplyKnobs(*task, combo);
    ASSERT_TRUE(out.source.has_value()) << out.error;
    const EvalResult r = Cpu().Evaluate(*task, *out.source, options);
    EXPECT_EQ(r.status, Status::kOk) << r.message;
    ASSERT_TRUE(r.correctness.has_value());
    EXPECT_EQ(r.correctness->trials_run, CorrectnessTrialCount(*task));
    EXPECT_TRUE(r.correctness->deterministic);
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, KnobsTest, ::testing::ValuesIn(TasksWithKnobs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)  // gtest names: letters, digits, '_'
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(SoftmaxKnobsTest, AValueOutsideTheDomainNeverReachesTheRunner) {
  const Task* task = Tasks().Find("cpu/softmax_rows");
  ASSERT_NE(task, nullptr);
  const EditOutcome out = ApplyKnobs(*task, {{"EXP", std::string("expf); system(\"id\"")}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_NE(out.error.find("allowed: std::exp, exp_poly"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace kernelgym::testing
