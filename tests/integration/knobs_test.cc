// Every task's knob template through the real cpu backend: its combinations of knob values
// (a covering sample, or all with KERNELGYM_KNOBS_FULL=1) compile and are correct, and the knobs
// change speed for real. Adding a task with knobs gets
// these checks for free.
#include "env/episode/knobs.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

// The combinations this run checks: all of them with KERNELGYM_KNOBS_FULL=1, else a covering
// sample (the defaults, every value of every knob, a few drawn) — the product of 15+ templates
// does not fit the CI's budget; bench/knob_sweep.py checks and times every combination.
std::vector<KnobCombination> CombinationsToCheck(const Task& task) {
  const char* full = std::getenv("KERNELGYM_KNOBS_FULL");
  if (full && std::string(full) == "1") return AllKnobCombinations(task);
  return CoveringKnobCombinations(task, 8, 2026);
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
    EXPECT_EQ(r.correctness->trials_run, task->trials);
    EXPECT_TRUE(r.correctness->deterministic);
  }
}

TEST_P(KnobsTest, TheDefaultCombinationIsCorrectAndTimed) {
  const Task* task = Tasks().Find(GetParam());
  ASSERT_NE(task, nullptr);
  const EditOutcome out = ApplyKnobs(*task, {});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  const EvalResult r = Cpu().Evaluate(*task, *out.source, FastOptions());
  ASSERT_EQ(r.status, Status::kOk) << r.message;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_GT(r.timing->speedup, 0);
  EXPECT_LE(r.timing->speedup_ci_low, r.timing->speedup);
  EXPECT_GE(r.timing->speedup_ci_high, r.timing->speedup);
}

INSTANTIATE_TEST_SUITE_P(Tasks, KnobsTest, ::testing::ValuesIn(TasksWithKnobs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)  // gtest names: letters, digits, '_'
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// cpu/softmax_rows is the worked example: its knobs must matter. With SIMD and the polynomial
// exp the loops vectorize (about 8x faster than the default combination on an AVX2 machine);
// the test asks for 2x so that a loaded machine still passes.
TEST(SoftmaxKnobsTest, VectorizingKnobsAreMuchFasterThanTheDefaults) {
  const Task* task = Tasks().Find("cpu/softmax_rows");
  ASSERT_NE(task, nullptr);
  ASSERT_FALSE(task->knobs.empty());
  const EditOutcome slow = ApplyKnobs(*task, {});
  const EditOutcome fast = ApplyKnobs(*task, {{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}});
  const EditOutcome recompute =
      ApplyKnobs(*task, {{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}, {"RECOMPUTE", int64_t{1}}});
  ASSERT_TRUE(slow.source && fast.source && recompute.source);
  const EvalResult r_slow = Cpu().Evaluate(*task, *slow.source, FastOptions());
  const EvalResult r_fast = Cpu().Evaluate(*task, *fast.source, FastOptions());
  const EvalResult r_recompute = Cpu().Evaluate(*task, *recompute.source, FastOptions());
  for (const EvalResult* r : {&r_slow, &r_fast, &r_recompute}) {
    ASSERT_EQ(r->status, Status::kOk) << r->message;
    ASSERT_TRUE(r->timing.has_value());
  }
  // In the test's XML report (--gtest_output=xml), for tuning the domains.
  ::testing::Test::RecordProperty("speedup_default", std::to_string(r_slow.timing->speedup));
  ::testing::Test::RecordProperty("speedup_simd_poly", std::to_string(r_fast.timing->speedup));
  ::testing::Test::RecordProperty("speedup_simd_poly_recompute", std::to_string(r_recompute.timing->speedup));
  EXPECT_GT(r_fast.timing->speedup, 2 * r_slow.timing->speedup)
      << "fast " << r_fast.timing->speedup << "x, default " << r_slow.timing->speedup << "x";
  EXPECT_GT(r_recompute.timing->speedup, r_slow.timing->speedup)
      << "recompute " << r_recompute.timing->speedup << "x, default " << r_slow.timing->speedup << "x";
  // The vectorized loops show up in the compiler's remarks, which the observation reports.
  ASSERT_TRUE(r_fast.profile.has_value());
  const auto& remarks = r_fast.profile->remarks;
  EXPECT_TRUE(std::any_of(remarks.begin(), remarks.end(), [](const Remark& m) { return m.vectorized; }));
}

TEST(SoftmaxKnobsTest, AValueOutsideTheDomainNeverReachesTheRunner) {
  const Task* task = Tasks().Find("cpu/softmax_rows");
  ASSERT_NE(task, nullptr);
  const EditOutcome out = ApplyKnobs(*task, {{"EXP", std::string("expf); system(\"id\"")}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_NE(out.error.find("allowed: std::exp, exp_poly"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace kernelgym::testing
