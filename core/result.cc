#include "core/result.h"

#include <array>
#include <cmath>
#include <utility>

namespace kernelgym {
namespace {

constexpr std::array<std::pair<Stage, std::string_view>, 7> kStages{{
    {Stage::kStaticCheck, "static_check"},
    {Stage::kCompile, "compile"},
    {Stage::kSymbolCheck, "symbol_check"},
    {Stage::kCorrectness, "correctness"},
    {Stage::kTiming, "timing"},
    {Stage::kProfile, "profile"},
    {Stage::kDone, "done"},
}};

constexpr std::array<std::pair<Status, std::string_view>, 9> kStatuses{{
    {Status::kOk, "ok"},
    {Status::kRejected, "rejected"},
    {Status::kCompileError, "compile_error"},
    {Status::kIncorrect, "incorrect"},
    {Status::kCrashed, "crashed"},
    {Status::kTimeout, "timeout"},
    {Status::kSandboxViolation, "sandbox_violation"},
    {Status::kImplausible, "implausible"},
    {Status::kInternalError, "internal_error"},
}};

}  // namespace

std::string_view StageName(Stage stage) {
  for (const auto& [s, name] : kStages)
    if (s == stage) return name;
  return "?";
}

std::string_view StatusName(Status status) {
  for (const auto& [s, name] : kStatuses)
    if (s == status) return name;
  return "?";
}

std::optional<Status> ParseStatus(std::string_view name) {
  for (const auto& [s, n] : kStatuses)
    if (n == name) return s;
  return std::nullopt;
}

std::optional<Stage> ParseStage(std::string_view name) {
  for (const auto& [s, n] : kStages)
    if (n == name) return s;
  return std::nullopt;
}

EvalResult NullBackendResult(const std::string& task_id) {
  EvalResult r;
  r.task_id = task_id;
  r.backend = "null";
  r.status = Status::kOk;
  r.stage = Stage::kDone;
  r.message = "null backend: not compiled or run";
  TimingReport timing;
  timing.speedup = timing.speedup_ci_low = timing.speedup_ci_high = 1.0;
  timing.converged = true;
  r.timing = timing;
  return r;
}

RewardableSpeedup RewardableSpeedupOf(const EvalResult& r) {
  if (r.status != Status::kOk) return {};
  auto usable = [](double s) { return std::isfinite(s) && s > 0; };
  if (r.timing && r.timing_representative)
    return usable(r.timing->speedup) ? RewardableSpeedup{r.timing->speedup, SpeedupKind::kMeasured} : RewardableSpeedup{};
  // The clock label and the trust are both the backend's verdict (a pallas result off a TPU):
  // an estimate on a result labelled with another clock is not what was judged.
  if (r.timing_clock != kTpuEstimateClock || !r.estimate || !r.estimate->trusted || !usable(r.estimate->speedup))
    return {};
  return {r.estimate->speedup, SpeedupKind::kEstimated};
}

std::string_view SpeedupKindName(SpeedupKind kind) {
  switch (kind) {
    case SpeedupKind::kMeasured: return "measured";
    case SpeedupKind::kEstimated: return "estimated";
    case SpeedupKind::kNone: break;
  }
  return "none";
}

}  // namespace kernelgym
