#include "env/episode/episode.h"

#include <cmath>
#include <variant>

#include "core/result_json.h"
#include "env/episode/knobs.h"
#include "env/episode/observation.h"
#include "env/episode/source_edits.h"

namespace kernelgym {
namespace {

// SplitMix64: derives independent per-evaluation seeds from the episode seed, so that the
// server (never the policy) chooses every input, and a replay with the same seed sees the same.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double SpeedupOfKind(const EvalResult& result, SpeedupKind kind) {
  const RewardableSpeedup s = RewardableSpeedupOf(result);
  return s.kind == kind ? s.value : 0;
}

}  // namespace

EvalResult EnvironmentFailure(const std::string& task_id, const std::string& backend, const std::string& code,
                              const std::string& message) {
  EvalResult r;
  r.task_id = task_id;
  r.backend = backend;
  r.status = Status::kInternalError;
  r.stage = Stage::kStaticCheck;
  r.message = code + ": " + message;
  return r;
}

Episode::Episode(std::shared_ptr<const Task> task, std::string backend, std::string reward_name,
                 std::shared_ptr<const Reward> reward, EpisodeLimits limits)
    : task_(std::move(task)),
      backend_(std::move(backend)),
      reward_name_(std::move(reward_name)),
      reward_(std::move(reward)),
      limits_(limits) {}

EvaluationRequest Episode::MakeRequest(const std::string& source, bool submit) {
  EvaluationRequest request;
  request.source = source;
  request.submit = submit;
  // A submit is judged on more trials than a step, and timed longer and more tightly.
  const int trials = submit ? 2 * task_->trials : task_->trials;
  for (int i = 0; i < trials; ++i) request.seeds.push_back(Mix(seed_ ^ Mix(++evaluations_)));
  request.timing_seed = Mix(seed_ ^ Mix(++evaluations_));
  if (submit) {
    request.timing_budget_s = 3.0;
    request.min_rounds = 40;
    request.target_relative_ci = 0.02;
  }
  return request;
}

EvaluationRequest Episode::Reset(uint64_t seed) {
  reset_ = true;
  done_ = false;
  seed_ = seed;
  evaluations_ = 0;
  sources_.assign(1, task_->StarterFor(backend_));
  best_speedup_ = 0;
  best_estimated_speedup_ = 0;
  seconds_used_ = 0;
  last_text_.clear();
  pending_ = PendingKind::kReset;
  pending_source_ = task_->StarterFor(backend_);
  pending_action_error_.clear();
  pending_submit_ = false;
  pending_reused_ = false;
  // Evaluations of the previous episode are dropped: a new seed means new inputs, and the
  // starter is evaluated afresh on them.
  evaluations_by_source_.clear();
  return MakeRequest(task_->StarterFor(backend_), false);
}

void Episode::BeginStep() { pending_ = PendingKind::kStep; }

Episode::Plan Episode::PlanStep(const protocol::Action& action) {
  EditOutcome outcome;
  const std::string& current = sources_.back();
  if (const auto* replace = std::get_if<protocol::ReplaceAction>(&action)) {
    outcome.source = replace->source;
  } else if (const auto* edit = std::get_if<protocol::EditAction>(&action)) {
    outcome = ApplyEdits(current, edit->edits);
  } else if (const auto* patch = std::get_if<protocol::PatchAction>(&action)) {
    outcome = ApplyPatch(current, patch->diff);
  } else if (const auto* knobs = std::get_if<protocol::KnobsAction>(&action)) {
    outcome = ApplyKnobs(*task_, backend_, knobs->values);
  } else if (const auto* revert = std::get_if<protocol::RevertAction>(&action)) {
    if (revert->to_step < 0 || revert->to_step > step())
      outcome.error = "revert: to_step " + std::to_string(revert->to_step) + " is not a step of this episode (0.." +
                      std::to_string(step()) + ")";
    else
      outcome.source = sources_[static_cast<std::size_t>(revert->to_step)];
  } else {  // submit: the current source, evaluated afresh under the stricter budget
    outcome.source = current;
  }
  return PlanStep(action, std::move(outcome));
}

Episode::Plan Episode::PlanStep(const protocol::Action& action, EditOutcome outcome) {
  Plan plan;
  pending_ = PendingKind::kStep;
  pending_action_error_.clear();
  pending_submit_ = std::holds_alternative<protocol::SubmitAction>(action);
  pending_reused_ = false;
  pending_action_kind_ = std::string(protocol::ActionKind(action));
  const std::string& current = sources_.back();

  if (!outcome.source) {
    pending_action_error_ = outcome.error.empty() ? "the action could not be applied" : outcome.error;
    pending_source_ = current;  // an invalid action leaves the source as it was
    return plan.action_error = pending_action_error_, plan;
  }
  pending_source_ = std::move(*outcome.source);
  if (!pending_submit_ && evaluations_by_source_.count(pending_source_)) {
    pending_reused_ = true;
    return plan;
  }
  plan.evaluation = MakeRequest(pending_source_, pending_submit_);
  return plan;
}

void Episode::RememberEvaluation(const std::string& source, const EvalResult& result) {
  // Environment failures are not the source's verdict: never cache them.
  if (result.status == Status::kInternalError) return;
  auto stored = std::make_shared<Evaluation>();
  stored->result = result;
  if (stored->result.timing) stored->result.timing->samples.clear();  // raw samples go to the recorder only
  stored->report = ResultToJson(stored->result, /*include_samples=*/false);
  evaluations_by_source_[source] = std::move(stored);
}

const Episode::Evaluation* Episode::Cached(const std::string& source) const {
  auto it = evaluations_by_source_.find(source);
  return it == evaluations_by_source_.end() ? nullptr : it->second.get();
}

protocol::Observation Episode::Observe(const EvalResult& result, const nlohmann::json* report,
                                       const std::string& action_error, bool reused) const {
  const ObservationContext context{.task = *task_,
                                   .source = sources_.back(),
                                   .step = step(),
                                   .best_speedup = best_speedup_,
                                   .best_estimated_speedup = best_estimated_speedup_,
                                   .steps_left = std::max<int64_t>(0, limits_.max_steps - step()),
                                   .max_steps = limits_.max_steps,
                                   .seconds_left = std::max(0.0, limits_.time_budget_s - seconds_used_),
                                   .time_budget_s = limits_.time_budget_s,
                                   .reused = reused,
                                   .action_error = action_error,
                                   .report = report};
  return BuildObservation(result, context);
}

protocol::ResetResult Episode::FinishReset(const EvalResult& result, const std::string& runner) {
  pending_ = PendingKind::kNone;
  seconds_used_ += result.seconds;
  best_speedup_ = SpeedupOfKind(result, SpeedupKind::kMeasured);
  best_estimated_speedup_ = SpeedupOfKind(result, SpeedupKind::kEstimated);
  RememberEvaluation(pending_source_, result);
  protocol::ResetResult out;
  const Evaluation* cached = Cached(pending_source_);
  out.observation = Observe(result, cached ? &cached->report : nullptr, "", false);
  last_text_ = out.observation.text;
  out.info = {{"seed", seed_}, {"runner", runner}, {"eval_seconds", result.seconds}};
  const RewardableSpeedup paid = RewardableSpeedupOf(result);
  out.info["speedup_kind"] = std::string(SpeedupKindName(paid.kind));
  if (paid.kind == SpeedupKind::kEstimated) out.info["estimated_speedup"] = paid.value;
  return out;
}

protocol::StepResult Episode::FinishStep(const EvalResult* result, const std::string& runner) {
  pending_ = PendingKind::kNone;
  const bool invalid = !pending_action_error_.empty();
  // The evaluation this step is judged on: the fresh one, the cached one for an unchanged
  // source, or (for an invalid action) a rejection standing for the action.
  EvalResult rejection;
  const EvalResult* judged = result;
  if (invalid) {
    rejection.task_id = task_->id;
    rejection.backend = backend_;
    rejection.status = Status::kRejected;
    rejection.stage = Stage::kStaticCheck;
    rejection.message = "invalid action: " + pending_action_error_;
    judged = &rejection;
  } else if (pending_reused_) {
    judged = &Cached(pending_source_)->result;
  }

  // A speedup is compared only with earlier ones of its kind (measured or estimated).
  const double best_before = RewardableSpeedupOf(*judged).kind == SpeedupKind::kEstimated ? best_estimated_speedup_ : best_speedup_;
  if (!invalid && !pending_reused_) {
    seconds_used_ += judged->seconds;
    RememberEvaluation(pending_source_, *judged);
  }
  sources_.push_back(pending_source_);
  best_speedup_ = std::max(best_speedup_, SpeedupOfKind(*judged, SpeedupKind::kMeasured));
  best_estimated_speedup_ = std::max(best_estimated_speedup_, SpeedupOfKind(*judged, SpeedupKind::kEstimated));

  protocol::StepResult out;
  RewardContext context{*judged, best_before, static_cast<int>(step()), static_cast<int>(limits_.max_steps),
                        pending_submit_};
  out.reward = reward_->Compute(context);
  out.terminated = pending_submit_;
  out.truncated = !out.terminated && (step() >= limits_.max_steps || seconds_used_ >= limits_.time_budget_s);
  done_ = out.terminated || out.truncated;
  // An invalid action is observed on the still-current source's evaluation (when there is one);
  // its status says why this step evaluated nothing.
  const bool evaluated = !invalid && !pending_reused_;
  // A fresh environment failure is not cached, and an older evaluation of the same source (a
  // submit re-evaluates) must not stand in for it.
  const Evaluation* shown =
      evaluated && judged->status == Status::kInternalError ? nullptr : Cached(pending_source_);
  out.observation = shown ? Observe(shown->result, &shown->report, pending_action_error_, pending_reused_)
                          : Observe(*judged, nullptr, pending_action_error_, pending_reused_);
  if (invalid) {
    out.observation.status = "invalid_action";
    out.observation.message = judged->message;
  }
  last_text_ = out.observation.text;
  out.info = {{"action", pending_action_kind_},
              {"outcome", invalid ? std::string("invalid_action") : std::string(OutcomeName(OutcomeOf(*judged)))},
              {"reused", pending_reused_},
              {"submit", pending_submit_},
              {"runner", runner},
              {"eval_seconds", evaluated ? judged->seconds : 0.0}};
  if (judged->status == Status::kInternalError) out.info["environment_error"] = judged->message;
  // What the reward paid for speed, by kind: a trusted TPU estimate is labelled as one here too.
  const RewardableSpeedup paid = RewardableSpeedupOf(*judged);
  out.info["speedup_kind"] = std::string(SpeedupKindName(paid.kind));
  if (paid.kind == SpeedupKind::kEstimated) out.info["estimated_speedup"] = paid.value;
  return out;
}

void Episode::Abandon() {
  if (pending_ == PendingKind::kReset) reset_ = false;  // the env needs a new reset
  pending_ = PendingKind::kNone;
}

std::unique_ptr<Episode> Episode::Fork() const {
  auto copy = std::make_unique<Episode>(*this);
  copy->pending_ = PendingKind::kNone;  // a step in flight belongs to the parent
  return copy;
}

std::size_t Episode::ApproximateBytes() const {
  std::size_t bytes = sizeof(*this) + last_text_.capacity();
  for (const std::string& s : sources_) bytes += s.capacity();
  for (const auto& [source, result] : evaluations_by_source_) bytes += source.capacity() + sizeof(Evaluation);
  return bytes;
}

}  // namespace kernelgym
