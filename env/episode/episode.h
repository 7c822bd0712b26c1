// One environment's episode as a plain state machine: no sockets, no clocks, no processes. The
// server owns one Episode per env id and drives it from its event loop (env/server/server.cc):
//
//   Reset(seed)  -> an evaluation to run (the starter)  -> Finish(result) -> reset observation
//   Plan(action) -> an evaluation to run, or none (an invalid action, an unchanged source)
//                -> Finish(result)                      -> step result (observation, reward, ...)
//
// At most one evaluation is pending at a time; the server refuses a second step on a busy env.
// Fork() copies everything (history, best so far, budgets, the evaluations of earlier sources),
// and nothing is shared mutably between a parent and its fork, so stepping one never changes
// the other.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "datasets/task.h"
#include "env/protocol/messages.h"
#include "env/episode/source_edits.h"
#include "env/protocol/results.h"
#include "rewards/reward.h"

namespace kernelgym {

struct EpisodeLimits {
  int64_t max_steps = 16;
  double time_budget_s = 600;  // runner seconds of evaluation the episode may use
};

// What the scheduler should evaluate for this episode's pending step.
// What one evaluation of an episode asks of its runner. A submit is stricter than a step in every
// way, decided here and nowhere else (Episode::MakeRequest): twice the trials, a longer timing
// budget, more rounds and a tighter interval. The server copies these into the job.
struct EvaluationRequest {
  std::string source;
  bool submit = false;            // the final, stricter evaluation
  std::vector<uint64_t> seeds;    // correctness seeds, derived from the episode seed
  uint64_t timing_seed = 0;
  double timing_budget_s = 1.0;   // seconds of timing after warm-up
  int min_rounds = 15;
  double target_relative_ci = 0.03;  // stop once the speedup's 95% CI is within +-3%
};

class Episode {
 public:
  Episode(std::shared_ptr<const Task> task, std::string backend, std::string reward_name,
          std::shared_ptr<const Reward> reward, EpisodeLimits limits);

  // Starts a new episode on the starter source. The previous episode's state is dropped.
  EvaluationRequest Reset(uint64_t seed);

  // The plan for one action: either an evaluation to run, or an immediate answer (when the
  // action is invalid or the source is unchanged), which Finish() still completes.
  struct Plan {
    std::optional<EvaluationRequest> evaluation;  // empty: answer without evaluating
    std::string action_error;                     // the action could not be applied
  };
  // Precondition: active() && !pending(). Marks the step pending.
  Plan PlanStep(const protocol::Action& action);
  // The same, with the action already applied to current_source() elsewhere (a `patch` runs GNU
  // patch, which the server does off its event loop): `applied` is what ApplyPatch returned.
  Plan PlanStep(const protocol::Action& action, EditOutcome applied);
  // Marks a step pending before its action is applied (the env is busy meanwhile); PlanStep or
  // Abandon follows.
  void BeginStep();

  // Completes the pending reset or step. `result` is the evaluation of the planned source; pass
  // nullptr when the plan had no evaluation. `runner` is recorded in info.
  protocol::ResetResult FinishReset(const EvalResult& result, const std::string& runner);
  protocol::StepResult FinishStep(const EvalResult* result, const std::string& runner);

  // Abandons a pending reset or step (the job failed for reasons outside the episode).
  void Abandon();

  std::unique_ptr<Episode> Fork() const;

  bool active() const { return reset_ && !done_; }  // reset and neither terminated nor truncated
  bool was_reset() const { return reset_; }
  bool pending() const { return pending_ != PendingKind::kNone; }
  bool done() const { return done_; }
  const Task& task() const { return *task_; }
  const std::string& task_id() const { return task_->id; }
  const std::string& backend() const { return backend_; }
  const std::string& reward_name() const { return reward_name_; }
  const Reward& reward() const { return *reward_; }
  const EpisodeLimits& limits() const { return limits_; }
  uint64_t seed() const { return seed_; }
  int64_t step() const { return static_cast<int64_t>(sources_.size()) - 1; }
  const std::string& current_source() const { return sources_.back(); }
  const std::string& last_text() const { return last_text_; }  // the latest observation's Markdown
  double seconds_used() const { return seconds_used_; }
  // Bytes this episode holds (sources, cached evaluations): for the memory benchmark and stats.
  std::size_t ApproximateBytes() const;

 private:
  enum class PendingKind { kNone, kReset, kStep };

  EvaluationRequest MakeRequest(const std::string& source, bool submit);
  // One evaluation of a source, with its report rendered once (re-used steps copy it).
  struct Evaluation {
    EvalResult result;  // without raw samples
    nlohmann::json report;
  };
  protocol::Observation Observe(const EvalResult& result, const nlohmann::json* report, const std::string& action_error,
                                bool reused) const;
  const Evaluation* Cached(const std::string& source) const;
  void RememberEvaluation(const std::string& source, const EvalResult& result);

  std::shared_ptr<const Task> task_;
  std::string backend_;
  std::string reward_name_;
  std::shared_ptr<const Reward> reward_;  // stateless: shared with forks
  EpisodeLimits limits_;

  bool reset_ = false;
  bool done_ = false;
  uint64_t seed_ = 0;
  uint64_t evaluations_ = 0;  // counter mixed into the per-evaluation seeds
  std::vector<std::string> sources_;  // sources_[k]: the source after step k (0 = starter)
  double best_speedup_ = 0;            // measured
  double best_estimated_speedup_ = 0;  // trusted TPU estimates (pallas off a TPU): never mixed with measured
  double seconds_used_ = 0;
  std::string last_text_;

  // Evaluations by source, so an unchanged source re-uses its result. Results are immutable once
  // stored, so forks share them.
  std::map<std::string, std::shared_ptr<const Evaluation>> evaluations_by_source_;

  // The step in progress.
  PendingKind pending_ = PendingKind::kNone;
  std::string pending_source_;
  std::string pending_action_error_;
  bool pending_submit_ = false;
  bool pending_reused_ = false;
  std::string pending_action_kind_;
};

// An EvalResult that stands for an evaluation that could not run (no runner, runner lost): an
// environment error, never penalized by a reward.
EvalResult EnvironmentFailure(const std::string& task_id, const std::string& backend, const std::string& code,
                              const std::string& message);

}  // namespace kernelgym
