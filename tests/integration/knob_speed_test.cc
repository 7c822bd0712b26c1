// Knobs change speed for real: the worked example's vectorizing knobs against its defaults, in
// one timing window each. A test that compares timings, so ctest runs it alone (RUN_SERIAL).
#include <gtest/gtest.h>

#include <algorithm>

#include "env/episode/knobs.h"
#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

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

}  // namespace
}  // namespace kernelgym::testing
