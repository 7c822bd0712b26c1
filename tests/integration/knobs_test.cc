// Every task's knob template through the real cpu backend: each combination of knob values
// compiles and is correct, and the knobs change speed for real. Adding a task with knobs gets
// these checks for free.
#include "env/episode/knobs.h"

#include <gtest/gtest.h>

#include <cctype>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

using Values = std::map<std::string, protocol::KnobValue>;

protocol::KnobValue ToProtocol(const Knob::Value& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  return std::get<std::string>(value);
}

// The cartesian product of the knobs' domains, in a fixed order.
std::vector<Values> AllCombinations(const Task& task) {
  std::vector<Values> combos{Values{}};
  for (const Knob& knob : task.knobs) {
    std::vector<Values> next;
    for (const Values& partial : combos)
      for (const Knob::Value& v : knob.values) {
        Values extended = partial;
        extended[knob.name] = ToProtocol(v);
        next.push_back(std::move(extended));
      }
    combos = std::move(next);
  }
  return combos;
}

std::string Describe(const Values& values) {
  std::string out;
  for (const auto& [name, v] : values)
    out += (out.empty() ? "" : " ") + name + "=" +
           (std::holds_alternative<int64_t>(v) ? std::to_string(std::get<int64_t>(v)) : std::get<std::string>(v));
  return out.empty() ? "(defaults)" : out;
}

std::vector<std::string> TasksWithKnobs() {
  std::vector<std::string> ids;
  for (const Task* t : Tasks().All())
    if (!t->knobs.empty()) ids.push_back(t->id);
  return ids;
}

class KnobsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KnobsTest, EveryCombinationCompilesAndIsCorrect) {
  const Task* task = Tasks().Find(GetParam());
  ASSERT_NE(task, nullptr);
  const std::vector<Values> combos = AllCombinations(*task);
  // Each combination is a kernel to check here: keep the domains small (docs/task_format.md).
  EXPECT_LE(combos.size(), 64u);
  EvalOptions options = FastOptions();
  options.run_timing = false;
  for (const Values& combo : combos) {
    SCOPED_TRACE(Describe(combo));
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
