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
  r.estimate = SpeedEstimate{};
  r.estimate->speedup = speedup;
  r.estimate->trusted = trusted == 1;
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

// The ordering contract (docs/adding_a_reward.md): a policy is never paid to fail. Over every
// registered reward with its defaults, and every episode state (best so far):
//   1. a correct kernel with a speed figure outranks every failing kernel; one without a figure
//      (speed not paid for) is never below one;
//   2. among correct kernels, more speed never pays less;
//   3. failures rank: cheating (violation, implausible) <= compile failure <= crash = timeout <=
//      wrong answer — each stage passed is progress toward a correct kernel.
std::vector<EvalResult> FailingResults() {
  std::vector<EvalResult> out;
  for (Status s : {Status::kRejected, Status::kCompileError, Status::kIncorrect, Status::kCrashed, Status::kTimeout,
                   Status::kSandboxViolation, Status::kImplausible})
    out.push_back(Result(s));
  return out;
}

const std::vector<double> kSpeedups = {1e-9, 1e-6, 1e-3, 0.01, 0.02, 0.1, 0.45, 0.999, 1.0, 1.001, 1.5, 2.0, 10.0, 99.0, 1e3, 1e9};

TEST_P(RewardConformanceTest, ACorrectKernelOutranksEveryFailingOne) {
  std::string error;
  const std::unique_ptr<Reward> reward = RewardRegistry::Global().Create(GetParam(), nlohmann::json::object(), error);
  ASSERT_NE(reward, nullptr) << error;
  for (double best : {0.0, 0.01, 0.2, 1.0, 3.0, 1e3}) {
    double best_failure = -std::numeric_limits<double>::infinity();
    for (const EvalResult& failing : FailingResults())
      best_failure = std::max(best_failure, reward->Compute(RewardContext{failing, best, 2, 10, false}));
    for (double speedup : kSpeedups) {
      const double measured = reward->Compute(RewardContext{Result(Status::kOk, speedup), best, 2, 10, false});
      const double estimated = reward->Compute(RewardContext{Estimated(speedup), best, 2, 10, false});
      EXPECT_GT(measured, best_failure) << "speedup " << speedup << " best " << best;
      EXPECT_GT(estimated, best_failure) << "estimated speedup " << speedup << " best " << best;
    }
    EXPECT_GE(reward->Compute(RewardContext{Result(Status::kOk), best, 2, 10, false}), best_failure)
        << "a correct kernel without a speed figure, best " << best;
  }
}

TEST_P(RewardConformanceTest, AmongCorrectKernelsMoreSpeedNeverPaysLess) {
  std::string error;
  const std::unique_ptr<Reward> reward = RewardRegistry::Global().Create(GetParam(), nlohmann::json::object(), error);
  ASSERT_NE(reward, nullptr) << error;
  for (double best : {0.0, 0.01, 0.2, 1.0, 3.0, 1e3})
    for (std::size_t i = 1; i < kSpeedups.size(); ++i) {
      const auto at = [&](double s) { return reward->Compute(RewardContext{Result(Status::kOk, s), best, 2, 10, false}); };
      EXPECT_LE(at(kSpeedups[i - 1]), at(kSpeedups[i])) << kSpeedups[i - 1] << " vs " << kSpeedups[i] << ", best " << best;
    }
}

TEST_P(RewardConformanceTest, FailuresRankCheatingThenCompileThenCrashThenWrongAnswer) {
  std::string error;
  const std::unique_ptr<Reward> reward = RewardRegistry::Global().Create(GetParam(), nlohmann::json::object(), error);
  ASSERT_NE(reward, nullptr) << error;
  const auto of = [&](Status s) { return reward->Compute(RewardContext{Result(s), 1.0, 2, 10, false}); };
  EXPECT_LE(of(Status::kSandboxViolation), of(Status::kCompileError));
  EXPECT_LE(of(Status::kImplausible), of(Status::kCompileError));
  EXPECT_EQ(of(Status::kRejected), of(Status::kCompileError));  // refused before compiling: a compile failure
  EXPECT_LE(of(Status::kCompileError), of(Status::kCrashed));
  EXPECT_EQ(of(Status::kCrashed), of(Status::kTimeout));
  EXPECT_LE(of(Status::kCrashed), of(Status::kIncorrect));
  // A reward with penalties tells the rungs apart: a GRPO group of failures still has a signal.
  if (RewardRegistry::Global().Create(GetParam(), {{"penalties", nlohmann::json::object()}}, error) != nullptr) {
    EXPECT_LT(of(Status::kSandboxViolation), of(Status::kCompileError));
    EXPECT_LT(of(Status::kCompileError), of(Status::kCrashed));
    EXPECT_LT(of(Status::kCrashed), of(Status::kIncorrect));
  }
}

TEST_P(RewardConformanceTest, NoPenaltyMayBeConfiguredAsHighAsACorrectKernel) {
  std::string error;
  const std::unique_ptr<Reward> reward = RewardRegistry::Global().Create(GetParam(), nlohmann::json::object(), error);
  ASSERT_NE(reward, nullptr) << error;
  if (RewardRegistry::Global().Create(GetParam(), {{"penalties", {{"incorrect", -1e3}}}}, error) == nullptr) {
    GTEST_SKIP() << GetParam() << " has no penalties";
  }
  double least_correct = std::numeric_limits<double>::infinity();
  for (double best : {0.0, 1.0, 1e3})
    for (double speedup : kSpeedups)
      least_correct = std::min(least_correct, reward->Compute(RewardContext{Result(Status::kOk, speedup), best, 2, 10, false}));
  EXPECT_EQ(RewardRegistry::Global().Create(GetParam(), {{"penalties", {{"incorrect", least_correct}}}}, error), nullptr)
      << "a failure configured to pay " << least_correct << ", what the worst correct kernel gets";
  EXPECT_NE(error.find("never outrank a correct kernel"), std::string::npos) << error;
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
  EXPECT_LT(Of(*reward, Result(Status::kIncorrect)), 0);  // below a correct kernel that is not fast
}

// The figures the issue measured: the usual starters run at 0.02-0.45x, and log_speedup paid them
// -3.9 to -0.8 while a broken kernel got -1.
TEST(BuiltinRewards, LogSpeedupPaysASlowCorrectKernelMoreThanABrokenOne) {
  const auto reward = Make("log_speedup");
  for (Status failing : {Status::kCompileError, Status::kIncorrect, Status::kCrashed})
    EXPECT_GT(Of(*reward, Result(Status::kOk, 0.02)), Of(*reward, Result(failing)));
  EXPECT_GT(Of(*reward, Result(Status::kIncorrect)), Of(*reward, Result(Status::kCompileError)));
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
  both.estimate = SpeedEstimate{};
  both.estimate->speedup = 9.0;
  both.estimate->trusted = true;
  EXPECT_EQ(RewardableSpeedupOf(both).kind, SpeedupKind::kMeasured);
  EXPECT_DOUBLE_EQ(Of(*Make("speedup"), both), 1.5);
}

}  // namespace
}  // namespace kernelgym
