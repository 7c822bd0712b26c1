// The episode state machine on its own: actions, re-use, rewards, termination vs truncation,
// forks, seeds. Evaluations are results built here (the episode never runs anything itself).
#include "env/episode/episode.h"

#include <gtest/gtest.h>

#include "datasets/suite.h"

namespace kernelgym {
namespace {

using protocol::Action;

std::shared_ptr<const Task> Softmax() {
  static const TaskRegistry registry = TaskRegistry::LoadFrom(KERNELGYM_SOURCE_DIR "/datasets/suites");
  const Task* task = registry.Find("cpu/softmax_rows");
  EXPECT_NE(task, nullptr);
  return std::shared_ptr<const Task>(std::shared_ptr<const Task>{}, task);
}

EvalResult Ok(double speedup, double seconds = 0.5) {
  EvalResult r;
  r.task_id = "cpu/softmax_rows";
  r.backend = "cpu";
  r.status = Status::kOk;
  r.stage = Stage::kDone;
  r.seconds = seconds;
  TimingReport t;
  t.speedup = speedup;
  t.speedup_ci_low = speedup * 0.98;
  t.speedup_ci_high = speedup * 1.02;
  r.timing = t;
  return r;
}

EvalResult Failed(Status status) {
  EvalResult r;
  r.task_id = "cpu/softmax_rows";
  r.status = status;
  r.stage = Stage::kCompile;
  r.message = "broken";
  r.seconds = 0.1;
  return r;
}

class EpisodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterBuiltinRewards();
    std::string error;
    reward_ = RewardRegistry::Global().Create(kDefaultReward, nlohmann::json::object(), error);
    ASSERT_NE(reward_, nullptr) << error;
  }
  std::unique_ptr<Episode> Make(int64_t max_steps = 8, double budget = 100) {
    return std::make_unique<Episode>(Softmax(), "cpu", kDefaultReward, reward_, EpisodeLimits{max_steps, budget});
  }
  // Resets and completes the reset with the starter at speedup 0.5.
  std::unique_ptr<Episode> Started(int64_t max_steps = 8, double budget = 100) {
    auto e = Make(max_steps, budget);
    const EvaluationRequest request = e->Reset(42);
    EXPECT_EQ(request.source, e->task().starter_source);
    e->FinishReset(Ok(0.5), "r1");
    return e;
  }
  protocol::StepResult StepWith(Episode& e, const Action& action, std::optional<EvalResult> result) {
    Episode::Plan plan = e.PlanStep(action);
    EXPECT_EQ(plan.evaluation.has_value(), result.has_value());
    return e.FinishStep(result ? &*result : nullptr, "r1");
  }
  std::shared_ptr<const Reward> reward_;
};

TEST_F(EpisodeTest, ResetObservesTheStarter) {
  auto e = Make();
  EXPECT_FALSE(e->active());
  e->Reset(7);
  EXPECT_TRUE(e->pending());
  protocol::ResetResult r = e->FinishReset(Ok(0.5), "r1");
  EXPECT_TRUE(e->active());
  EXPECT_EQ(r.observation.step, 0);
  EXPECT_EQ(r.observation.status, "ok");
  EXPECT_DOUBLE_EQ(r.observation.best_speedup, 0.5);
  EXPECT_EQ(r.observation.steps_left, 8);
  EXPECT_EQ(r.observation.source, e->task().starter_source);
  EXPECT_EQ(r.info["seed"], 7);
}

TEST_F(EpisodeTest, AFasterKernelIsRewardedAndBecomesTheBest) {
  auto e = Started();
  protocol::StepResult s = StepWith(*e, protocol::ReplaceAction{"// faster\n"}, Ok(2.0));
  EXPECT_GT(s.reward, 0);
  EXPECT_NEAR(s.reward, std::log(2.0) - std::log(0.5), 1e-9);
  EXPECT_DOUBLE_EQ(s.observation.best_speedup, 2.0);
  EXPECT_EQ(s.observation.step, 1);
  EXPECT_FALSE(s.terminated);
  EXPECT_FALSE(s.truncated);
  // A slower one afterwards gains nothing and keeps the best.
  protocol::StepResult slower = StepWith(*e, protocol::ReplaceAction{"// slower\n"}, Ok(1.0));
  EXPECT_EQ(slower.reward, 0);
  EXPECT_DOUBLE_EQ(slower.observation.best_speedup, 2.0);
}

TEST_F(EpisodeTest, AnUnchangedSourceReusesItsEvaluation) {
  auto e = Started();
  StepWith(*e, protocol::ReplaceAction{"// v1\n"}, Ok(2.0));
  protocol::StepResult again = StepWith(*e, protocol::ReplaceAction{"// v1\n"}, std::nullopt);
  EXPECT_TRUE(again.observation.reused);
  EXPECT_EQ(again.info["reused"], true);
  EXPECT_EQ(again.observation.status, "ok");
  EXPECT_DOUBLE_EQ(again.observation.speedup, 2.0);
  EXPECT_EQ(again.reward, 0);
  EXPECT_EQ(again.observation.step, 2);  // it still counts as a step
}

TEST_F(EpisodeTest, AnInvalidActionIsAPenalizedObservationNotAnError) {
  auto e = Started();
  protocol::StepResult s =
      StepWith(*e, protocol::EditAction{{{"this text is not in the kernel", "x"}}}, std::nullopt);
  EXPECT_EQ(s.observation.status, "invalid_action");
  EXPECT_FALSE(s.observation.action_error.empty());
  EXPECT_NE(s.observation.action_error.find("edit block 0"), std::string::npos) << s.observation.action_error;
  EXPECT_LT(s.reward, 0);
  EXPECT_EQ(s.observation.source, e->task().starter_source);  // unchanged
  EXPECT_TRUE(e->active());
  // Revert to a step that does not exist: also an observation.
  protocol::StepResult r = StepWith(*e, protocol::RevertAction{99}, std::nullopt);
  EXPECT_EQ(r.observation.status, "invalid_action");
  EXPECT_NE(r.observation.action_error.find("to_step 99"), std::string::npos);
}

TEST_F(EpisodeTest, FailuresArePenalizedByOutcome) {
  auto e = Started();
  protocol::StepResult compile = StepWith(*e, protocol::ReplaceAction{"broken {"}, Failed(Status::kCompileError));
  EXPECT_LT(compile.reward, 0);
  EXPECT_EQ(compile.observation.status, "compile_error");
  EXPECT_EQ(compile.info["outcome"], "compile_failure");
  // An environment failure (runner lost) is never the policy's fault.
  protocol::StepResult lost = StepWith(*e, protocol::ReplaceAction{"// v2\n"},
                                       EnvironmentFailure("cpu/softmax_rows", "cpu", "RUNNER_LOST", "gone"));
  EXPECT_EQ(lost.reward, 0);
  EXPECT_TRUE(lost.info.contains("environment_error"));
  // ... and is not cached: the same source is evaluated again.
  EXPECT_TRUE(e->PlanStep(protocol::ReplaceAction{"// v2\n"}).evaluation.has_value());
}

TEST_F(EpisodeTest, SubmitTerminatesAndIsEvaluatedAfreshOnMoreTrials) {
  auto e = Started();
  StepWith(*e, protocol::ReplaceAction{"// v1\n"}, Ok(2.0));
  Episode::Plan plan = e->PlanStep(protocol::SubmitAction{});
  ASSERT_TRUE(plan.evaluation.has_value());  // not re-used, even though the source is unchanged
  EXPECT_TRUE(plan.evaluation->submit);
  EXPECT_EQ(plan.evaluation->source, "// v1\n");
  EXPECT_EQ(static_cast<int>(plan.evaluation->seeds.size()), 2 * e->task().trials);
  EvalResult final_result = Ok(1.9);
  protocol::StepResult s = e->FinishStep(&final_result, "r1");
  EXPECT_TRUE(s.terminated);
  EXPECT_FALSE(s.truncated);
  EXPECT_FALSE(e->active());
}

TEST_F(EpisodeTest, TheStepBudgetTruncates) {
  auto e = Started(/*max_steps=*/2);
  EXPECT_FALSE(StepWith(*e, protocol::ReplaceAction{"// a\n"}, Ok(1.0)).truncated);
  protocol::StepResult last = StepWith(*e, protocol::ReplaceAction{"// b\n"}, Ok(1.0));
  EXPECT_TRUE(last.truncated);
  EXPECT_FALSE(last.terminated);
  EXPECT_EQ(last.observation.steps_left, 0);
  EXPECT_FALSE(e->active());
}

TEST_F(EpisodeTest, TheTimeBudgetTruncates) {
  auto e = Started(/*max_steps=*/100, /*budget=*/1.0);  // the reset used 0.5 s
  protocol::StepResult s = StepWith(*e, protocol::ReplaceAction{"// a\n"}, Ok(1.0, /*seconds=*/0.6));
  EXPECT_TRUE(s.truncated);
  EXPECT_DOUBLE_EQ(s.observation.seconds_left, 0);
}

TEST_F(EpisodeTest, ForksAreIndependent) {
  auto parent = Started();
  StepWith(*parent, protocol::ReplaceAction{"// parent v1\n"}, Ok(1.5));
  std::unique_ptr<Episode> child = parent->Fork();
  EXPECT_EQ(child->step(), 1);
  EXPECT_EQ(child->current_source(), "// parent v1\n");
  protocol::StepResult c = StepWith(*child, protocol::ReplaceAction{"// child v2\n"}, Ok(3.0));
  EXPECT_DOUBLE_EQ(c.observation.best_speedup, 3.0);
  // The parent did not move.
  EXPECT_EQ(parent->step(), 1);
  EXPECT_EQ(parent->current_source(), "// parent v1\n");
  protocol::StepResult p = StepWith(*parent, protocol::ReplaceAction{"// parent v2\n"}, Ok(1.6));
  EXPECT_DOUBLE_EQ(p.observation.best_speedup, 1.6);
  EXPECT_EQ(p.observation.step, 2);
  EXPECT_EQ(child->step(), 2);
  EXPECT_EQ(child->current_source(), "// child v2\n");
}

TEST_F(EpisodeTest, RevertRestoresAnEarlierSource) {
  auto e = Started();
  StepWith(*e, protocol::ReplaceAction{"// v1\n"}, Ok(2.0));
  protocol::StepResult r = StepWith(*e, protocol::RevertAction{0}, std::nullopt);  // the starter: evaluated at reset
  EXPECT_EQ(r.observation.source, e->task().starter_source);
  EXPECT_TRUE(r.observation.reused);
  EXPECT_DOUBLE_EQ(r.observation.speedup, 0.5);
}

// A submit is stricter than a step in every way, decided by the episode alone: twice the trials,
// a longer timing budget, more rounds, a tighter interval.
TEST_F(EpisodeTest, ASubmitIsStricterThanAStepInEveryWay) {
  auto e = Make();
  const EvaluationRequest reset = e->Reset(7);
  ASSERT_FALSE(reset.submit);
  e->FinishReset(Ok(0.5), "r1");
  const Episode::Plan plan = e->PlanStep(protocol::SubmitAction{});
  ASSERT_TRUE(plan.evaluation.has_value());
  const EvaluationRequest& submit = *plan.evaluation;
  EXPECT_TRUE(submit.submit);
  EXPECT_EQ(submit.seeds.size(), 2 * reset.seeds.size());
  EXPECT_GT(submit.timing_budget_s, reset.timing_budget_s);
  EXPECT_GT(submit.min_rounds, reset.min_rounds);
  EXPECT_LT(submit.target_relative_ci, reset.target_relative_ci);
}

TEST_F(EpisodeTest, SeedsComeFromTheEpisodeSeed) {
  auto a = Make(), b = Make(), c = Make();
  const EvaluationRequest ra = a->Reset(1), rb = b->Reset(1), rc = c->Reset(2);
  EXPECT_EQ(ra.seeds, rb.seeds);
  EXPECT_EQ(ra.timing_seed, rb.timing_seed);
  EXPECT_NE(ra.seeds, rc.seeds);
  ASSERT_GE(ra.seeds.size(), 2u);
  EXPECT_NE(ra.seeds[0], ra.seeds[1]);
}

}  // namespace
}  // namespace kernelgym
