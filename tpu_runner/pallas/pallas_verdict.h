// What the runner makes of the judge's facts: the candidate's outputs compared with the
// reference's (here, outside every process the candidate's program ran in), the TPU's timing
// samples read into a report, and the verdict, including whether the estimate is paid. That
// last decision is made here and nowhere else: the judge reports the estimator's figures, the
// rewards read SpeedEstimate::trusted (RewardableSpeedupOf).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tpu_runner/pallas/judge_protocol.h"
#include "tpu_runner/pallas/pallas_stages.h"
#include "tpu_runner/timing_options.h"

namespace kernelgym {

// The candidate's outputs (the judge's `trials`, files in `job_dir`) against `expected`: fills
// r.correctness; a Stop when they are wrong, missing, changed their inputs or differ between runs.
[[nodiscard]] StageOutcome CompareOutputs(const std::vector<judge::CandidateRun>& runs, const std::filesystem::path& job_dir,
                                          const std::map<std::pair<int, int>, ExpectedOutput>& expected,
                                          const std::vector<uint64_t>& seeds, EvalResult& r);

// The judge's timing block: r.timing only when a TPU's own clock produced enough samples.
void ReadTiming(const judge::Timing& timing, const TimingOptions& options, EvalResult& r);

// The speed estimate from the judge's figures for the candidate and the reference's (nullopt:
// none was computed or passed), not yet judged: trusted is false until DecideEstimate.
SpeedEstimate EstimateOf(const judge::CandidateEstimate& candidate,
                         const std::optional<judge::ReferenceEstimate>& reference);

// Whether the estimate may be paid, with the reasons when not: both figures present and trusted
// by the estimator, and no clock of the target ran (a TPU host's measurement, even a failed one,
// is never replaced by an estimate).
void DecideEstimate(SpeedEstimate& estimate, bool target_clock_ran);

// The verdict of an evaluation that passed every stage: status ok, its stage and message, the
// timing clock that stands behind its speed, and whether its estimate is paid.
void DecideVerdict(EvalResult& r, bool on_tpu);

}  // namespace kernelgym
