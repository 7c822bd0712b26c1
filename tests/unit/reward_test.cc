// Conformance over every registered reward (a new reward is tested for free), then the
// behaviour each built-in promises.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "rewards/reward.h"

namespace kernelgym {
namespace {

EvalResult Result(Status status, double speedup = 0) {
  EvalResult r;
  r.status = status;
  if (status == Status::kOk && speedup != 0) {
    r.timing = TimingReport{};
    r.timing->speedup = speedup;
  }
  return r;
}

// A correct pallas result off a TPU: no clock of the target ran, the compiler's estimate stands in.
EvalResult Estimated(double speedup, double trusted = 1, std::string clock = std::string(kTpuEstimateClock)) {
  EvalResult r;
  r.status = Status::kOk;
  r.timing_representative = false;
  r.timing_clock = std::move(clock);
  r.estimates["estimated_speedup"] = speedup;
  r.estimates["estimate_trusted"] = trusted;
  return r;
}

// Every kind of result a reward can meet, including odd ones (a correct result without
// timing, absurd speedups, a NaN that a broken record could carry).
std::vector<EvalResult> FixedResults() {
  std::vector<EvalResult> results;
  for (Status s : {Status::kRejected, Status::kCompileError, Status::kIncorrect, Status::kCrashed, Status::kTimeout,
                   Status::kSandboxViolation, Status::kImplausible, Status::kInternalError})
    results.push_back(Result(s));
  for (double speedup : {1e-6, 0.01, 0.5, 0.999, 1.0, 1.5, 2.0, 10.0, 1e3, 1e9,
                         std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), -3.0})
    results.push_back(Result(Status::kOk, speedup));
  results.push_back(Result(Status::kOk));  // correct, not timed
  for (double speedup : {1e-6, 0.5, 2.0, 1e9, std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN(), -3.0, 0.0})
    for (double trusted : {1.0, 0.0})
      results.push_back(Estimated(speedup, trusted));
  return results;
}

class RewardConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { RegisterBuiltinRewards(); }
};

TEST_P(RewardConformanceTest, FiniteDeterministicBoundedAndFairToTheEnvironment) {
  std::string error;
  const std::unique_ptr<Reward> reward = RewardRegistry::Global().Create(GetParam(), nlohmann::json::object(), error);
  ASSERT_NE(reward, nullptr) << error;
  const RewardRange range = reward->range();
  ASSERT_TRUE(std::isfinite(range.min) && std::isfinite(range.max));
  ASSERT_LE(range.min, range.max);
  for (const EvalResult& result : FixedResults())
    for (double best : {0.0, 0.2, 1.0, 3.0}) {
      const RewardContext context{result, best, 2, 10, false};
      const double value = reward->Compute(context);
      const std::string where = std::string(StatusName(result.status)) + " speedup " +
                                (result.timing ? std::to_string(result.timing->speedup) : "none") + " best " +
                                std::to_string(best);
      EXPECT_TRUE(std::isfinite(value)) << where;
      EXPECT_EQ(value, reward->Compute(context)) << where << ": not deterministic";
      EXPECT_GE(value, range.min) << where;
      EXPECT_LE(value, range.max) << where;
      if (result.status == Status::kInternalError) {
        EXPECT_EQ(value, 0) << "environment errors are not the policy's fault";
      }
    }
}

TEST_P(RewardConformanceTest, RejectsUnknownConfigFieldsByName) {
  std::string error;
  EXPECT_EQ(RewardRegistry::Global().Create(GetParam(), {{"no_such_field", 1}}, error), nullptr);
  EXPECT_NE(error.find("no_such_field"), std::string::npos) << error;
  EXPECT_FALSE(RewardRegistry::Global().Description(GetParam()).empty());
}

INSTANTIATE_TEST_SUITE_P(Registered, RewardConformanceTest, ::testing::ValuesIn([] {
                           RegisterBuiltinRewards();
                           return RewardRegistry::Global().Names();
                         }()));

std::unique_ptr<Reward> Make(const std::string& name, const nlohmann::json& config = nlohmann::json::object()) {
  RegisterBuiltinRewards();
  std::string error;
  auto reward = RewardRegistry::Global().Create(name, config, error);
  EXPECT_NE(reward, nullptr) << error;
  return reward;
}

double Of(const Reward& reward, const EvalResult& result, double best = 0) {
  return reward.Compute(RewardContext{result, best, 1, 10, false});
}

TEST(BuiltinRewards, TheDefaultIsRegistered) {
  RegisterBuiltinRewards();
  const auto names = RewardRegistry::Global().Names();
  for (const char* name : {"log_speedup_gain", "speedup", "log_speedup", "fast_p", "piecewise", "kevin"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  EXPECT_STREQ(kDefaultReward, "log_speedup_gain");
}

TEST(BuiltinRewards, LogSpeedupGainSumsToTheLogOfTheFinalImprovement) {
  const auto reward = Make("log_speedup_gain");
  // starter 0.5x -> 1.0x -> 0.8x (worse: 0, not negative) -> 2.0x
  double best = 0.5, total = 0;
  for (double s : {1.0, 0.8, 2.0}) {
    total += Of(*reward, Result(Status::kOk, s), best);
    best = std::max(best, s);
  }
  EXPECT_NEAR(total, std::log(2.0 / 0.5), 1e-12);
  EXPECT_EQ(Of(*reward, Result(Status::kOk, 0.8), 1.0), 0);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kIncorrect), 1.0), -0.1);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kImplausible), 1.0), -1);
}

TEST(BuiltinRewards, PenaltiesAreConfigurableAndMustNotBeRewards) {
  const auto reward = Make("log_speedup_gain", {{"penalties", {{"incorrect", -0.7}}}});
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kIncorrect)), -0.7);
  std::string error;
  RegisterBuiltinRewards();
  EXPECT_EQ(RewardRegistry::Global().Create("log_speedup_gain", {{"penalties", {{"incorrect", 0.5}}}}, error), nullptr);
  EXPECT_NE(error.find("penalties.incorrect"), std::string::npos) << error;
  error.clear();
  EXPECT_EQ(RewardRegistry::Global().Create("log_speedup_gain", {{"cap", "big"}}, error), nullptr);
  EXPECT_NE(error.find("cap"), std::string::npos) << error;
}

TEST(BuiltinRewards, SpeedupAndLogSpeedupAreCapped) {
  EXPECT_DOUBLE_EQ(Of(*Make("speedup", {{"cap", 5}}), Result(Status::kOk, 1e9)), 5);
  EXPECT_DOUBLE_EQ(Of(*Make("speedup"), Result(Status::kCrashed)), 0);
  EXPECT_NEAR(Of(*Make("log_speedup", {{"cap", 10}}), Result(Status::kOk, 1e-9)), -std::log(10.0), 1e-12);
  EXPECT_NEAR(Of(*Make("log_speedup"), Result(Status::kOk, 2)), std::log(2.0), 1e-12);
}

TEST(BuiltinRewards, FastPIsAThreshold) {
  const auto reward = Make("fast_p", {{"p", 1.5}});
  EXPECT_EQ(Of(*reward, Result(Status::kOk, 1.5)), 0);
  EXPECT_EQ(Of(*reward, Result(Status::kOk, 1.51)), 1);
  EXPECT_EQ(Of(*reward, Result(Status::kIncorrect)), 0);
}

TEST(BuiltinRewards, PiecewiseFollowsItsSchedule) {
  const auto reward = Make("piecewise");
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kCompileError)), -1);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kIncorrect)), -0.5);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kOk, 0.7)), 0.1);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kOk, 3)), 1 + 2);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kOk, 1e6)), 1 + 9);  // cap 10
}

TEST(BuiltinRewards, KevinRewardsCorrectnessThenSpeed) {
  const auto reward = Make("kevin");
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kOk, 2)), 2.3);
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kOk)), 0.3);  // correct, not timed
  EXPECT_DOUBLE_EQ(Of(*reward, Result(Status::kTimeout)), 0);
}

TEST(BuiltinRewards, UnknownRewardIsAnError) {
  RegisterBuiltinRewards();
  std::string error;
  EXPECT_EQ(RewardRegistry::Global().Create("no_such_reward", nlohmann::json::object(), error), nullptr);
  EXPECT_NE(error.find("no_such_reward"), std::string::npos);
}

TEST(BuiltinRewards, ATrustedTpuEstimateIsPaidWhereNoClockRanAndLabelledSo) {
  const EvalResult estimated = Estimated(2.0);
  EXPECT_EQ(RewardableSpeedupOf(estimated).kind, SpeedupKind::kEstimated);
  EXPECT_DOUBLE_EQ(Of(*Make("speedup"), estimated), 2.0);
  EXPECT_DOUBLE_EQ(Of(*Make("log_speedup"), estimated), std::log(2.0));
  EXPECT_DOUBLE_EQ(Of(*Make("log_speedup_gain"), estimated, 1.0), std::log(2.0));
  EXPECT_EQ(Of(*Make("fast_p", {{"p", 1.5}}), estimated), 1);
}

TEST(BuiltinRewards, AnEstimateIsNotPaidWhenUntrustedOffOrNotTheEstimateClock) {
  for (const char* name : {"speedup", "log_speedup_gain", "fast_p", "kevin", "piecewise", "log_speedup"}) {
    const auto paid = Make(name);
    const auto off = Make(name, {{"estimated_speedup", false}});
    // What a correct, untimed kernel earns; best so far 1.0x, so that the gain reward has a base.
    const double correct_unpaid = Of(*paid, Result(Status::kOk), 1.0);
    EXPECT_GT(Of(*paid, Estimated(4.0), 1.0), correct_unpaid) << name;
    EXPECT_EQ(Of(*paid, Estimated(4.0, /*trusted=*/0), 1.0), correct_unpaid) << name << ": an untrusted estimate";
    EXPECT_EQ(Of(*off, Estimated(4.0), 1.0), correct_unpaid) << name << ": estimated_speedup false";
    EXPECT_EQ(Of(*paid, Estimated(4.0, 1, "cpu"), 1.0), correct_unpaid) << name << ": not the estimate's clock";
    EXPECT_EQ(Of(*paid, Estimated(4.0, 1, "none"), 1.0), correct_unpaid) << name;
  }
  std::string error;
  EXPECT_EQ(RewardRegistry::Global().Create("speedup", {{"estimated_speedup", 1}}, error), nullptr);
  EXPECT_NE(error.find("estimated_speedup"), std::string::npos) << error;
}

TEST(BuiltinRewards, AMeasuredSpeedupWinsOverAnEstimateBesideIt) {
  EvalResult both = Result(Status::kOk, 1.5);  // a TPU host: measured, the estimate reported beside it
  both.timing_clock = "tpu_device";
  both.estimates["estimated_speedup"] = 9.0;
  both.estimates["estimate_trusted"] = 1;
  EXPECT_EQ(RewardableSpeedupOf(both).kind, SpeedupKind::kMeasured);
  EXPECT_DOUBLE_EQ(Of(*Make("speedup"), both), 1.5);
}

}  // namespace
}  // namespace kernelgym
