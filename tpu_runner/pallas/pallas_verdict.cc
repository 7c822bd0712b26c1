#include "tpu_runner/pallas/pallas_verdict.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "tpu_runner/correctness.h"
#include "tpu_runner/timing_stats.h"

namespace kernelgym {
namespace {

std::optional<std::string> ReadBinary(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::span<const std::byte> Bytes(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string FormatSpeedup(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3fx", x);
  return buf;
}

Stop Incorrect(std::string message) { return {Status::kIncorrect, Stage::kCorrectness, std::move(message)}; }

}  // namespace

StageOutcome CompareOutputs(const std::vector<judge::CandidateRun>& runs, const std::filesystem::path& job_dir,
                            const std::map<std::pair<int, int>, ExpectedOutput>& expected,
                            const std::vector<uint64_t>& seeds, EvalResult& r) {
  CorrectnessReport report;
  report.seeds = seeds;
  std::map<int, OutputCheck> worst;                      // per output index
  std::map<std::pair<int, int>, std::string> first_run;  // (trial, output) -> bytes of the first run
  std::set<int> arrived;                                 // trials whose first run came back with every output
  std::string failure;
  for (const judge::CandidateRun& run : runs) {
    const int trial = static_cast<int>(run.trial);
    for (int k = 0; k < static_cast<int>(run.outputs.size()); ++k) {
      auto want = expected.find({trial, k});
      if (want == expected.end()) {
        failure = "the judge reported output " + std::to_string(k) + " of trial " + std::to_string(trial) +
                  " that the reference never produced";
        break;
      }
      const judge::OutputFile& o = run.outputs[k];
      const std::optional<std::string> actual = ReadBinary(job_dir / std::filesystem::path(o.file).filename());
      if (!actual) {
        failure = "output '" + want->second.spec.name + "' of trial " + std::to_string(trial) + " is missing";
        break;
      }
      if (o.shape != want->second.spec.shape || o.dtype != DTypeName(want->second.spec.dtype)) {
        failure = "output '" + want->second.spec.name + "' is " + o.dtype + ShapeText(o.shape) + "; the task's is " +
                  std::string(DTypeName(want->second.spec.dtype)) + ShapeText(want->second.spec.shape);
        break;
      }
      if (run.repeat > 0) {
        if (first_run[{trial, k}] != *actual) report.deterministic = false;
        continue;
      }
      first_run[{trial, k}] = *actual;
      OutputCheck check = CompareOutput(want->second.spec, Bytes(want->second.bytes), Bytes(*actual));
      if (!worst.count(k) || worst[k].passed()) worst[k] = check;
    }
    if (!failure.empty()) break;
    if (run.repeat == 0) {
      if (!expected.count({trial, static_cast<int>(run.outputs.size())})) arrived.insert(trial);
      report.trials_run = static_cast<int>(arrived.size());
      auto want = expected.find({trial, 0});
      if (want != expected.end() && run.inputs_sha256 != want->second.inputs_sha256)
        failure = "the kernel changed its inputs (trial " + std::to_string(trial) + ")";
    }
    if (!failure.empty()) break;
  }
  // Every trial the reference ran must have come back: a missing one is a failure, not a pass.
  if (failure.empty())
    for (const auto& [key, want] : expected)
      if (!arrived.count(key.first)) {
        failure = "the outputs of trial " + std::to_string(key.first) + " did not arrive";
        break;
      }
  for (auto& [k, check] : worst) report.checks.push_back(check);
  r.correctness = report;
  r.stage = Stage::kCorrectness;
  if (!failure.empty()) return Incorrect(failure);
  for (const OutputCheck& c : report.checks)
    if (!c.passed())
      return Incorrect("output '" + c.output + "': " + std::to_string(c.mismatches) + " of " +
                       std::to_string(c.elements) + " elements outside tolerance");
  if (!report.deterministic) return Incorrect("two runs on the same inputs gave different outputs");
  if (report.trials_run < static_cast<int>(seeds.size()))
    return Incorrect("the judge reported " + std::to_string(report.trials_run) + " of " + std::to_string(seeds.size()) +
                     " trials");
  return std::nullopt;
}

void ReadTiming(const judge::Timing& timing, const TimingOptions& options, EvalResult& r) {
  r.timing_clock = timing.clock;
  r.timing_note = timing.reason;
  r.timing_representative = timing.representative && r.timing_clock == "tpu_device";
  if (!r.timing_representative) return;
  TimingReport report;
  std::vector<double> reference_ns, candidate_ns;
  for (const judge::TimingSample& s : timing.samples) {
    TimingSample sample;
    sample.reference_ns = s.reference_ns;
    sample.candidate_ns = s.candidate_ns;
    sample.reference_cpu_ns = sample.reference_ns;  // device time: no preemption to discard
    sample.candidate_cpu_ns = sample.candidate_ns;
    if (sample.reference_ns <= 0 || sample.candidate_ns <= 0) continue;
    reference_ns.push_back(sample.reference_ns);
    candidate_ns.push_back(sample.candidate_ns);
    report.samples.push_back(sample);
  }
  const RatioEstimate speedup = EstimateSpeedup(report.samples);
  if (speedup.median <= 0) {
    r.timing_representative = false;
    r.timing_note = "the TPU trace gave " + std::to_string(report.samples.size()) +
                    " usable rounds (6 needed for an interval): " + r.timing_note;
    return;
  }
  report.reference = Summarize(reference_ns);
  report.candidate = Summarize(candidate_ns);
  report.speedup = speedup.median;
  report.speedup_ci_low = speedup.low;
  report.speedup_ci_high = speedup.high;
  report.rounds = static_cast<int>(report.samples.size());
  // The cpu backend's rule: the interval met its target on at least the minimum number of rounds.
  report.converged = speedup.relative_half_width <= options.target_relative_ci &&
                     static_cast<int>(report.samples.size()) >= options.min_rounds;
  report.seconds = timing.seconds;
  r.timing = report;
  r.stage = Stage::kTiming;
  if (!timing.profile.empty()) {
    ProfileReport profile;
    profile.counters = timing.profile;
    profile.achieved_gflops = profile.counters.count("achieved_flops") ? profile.counters["achieved_flops"] / 1e9 : 0;
    profile.peak_gflops = profile.counters.count("peak_flops") ? profile.counters["peak_flops"] / 1e9 : 0;
    r.profile = profile;
  }
}

SpeedEstimate EstimateOf(const judge::CandidateEstimate& candidate,
                         const std::optional<judge::ReferenceEstimate>& reference) {
  SpeedEstimate e;
  e.method = candidate.method;
  e.candidate_us = candidate.estimated_us;
  e.candidate_trusted = candidate.trusted;
  e.reasons = candidate.reasons;
  if (reference) {
    e.reference_us = reference->estimated_us;
    e.reference_trusted = reference->trusted;
  }
  if (e.reference_us > 0 && e.candidate_us > 0) e.speedup = e.reference_us / e.candidate_us;
  if (e.reference_us <= 0)
    e.reasons.push_back(reference && !reference->error.empty()
                            ? "no estimate for the reference: " + reference->error
                            : "no estimate for the reference (none computed in this job and none cached)");
  else if (!e.reference_trusted)
    e.reasons.push_back("the reference's estimate is not trusted");
  return e;
}

void DecideEstimate(SpeedEstimate& e, bool target_clock_ran) {
  if (target_clock_ran) e.reasons.push_back("the target's own clock ran here: its measurement is the speed signal");
  if (e.candidate_us <= 0 && e.reasons.empty()) e.reasons.push_back("no estimate for the candidate");
  if (!e.candidate_trusted && e.reasons.empty()) e.reasons.push_back("the estimator does not trust the candidate's figure");
  e.trusted = e.candidate_trusted && e.reference_trusted && e.speedup > 0 && e.reasons.empty();
}

void DecideVerdict(EvalResult& r, bool on_tpu) {
  r.status = Status::kOk;
  r.stage = r.timing ? Stage::kTiming : Stage::kCorrectness;
  r.message = r.timing ? "correct; timed on the TPU" : "correct (TPU interpret mode); not timed: " + r.timing_note;
  const bool target_clock_ran = on_tpu || r.timing_representative;
  if (r.estimate) DecideEstimate(*r.estimate, target_clock_ran);
  if (target_clock_ran) return;
  // No TPU here: the compiler's static estimate is the speed signal, when it is trusted.
  if (!r.estimate) {
    r.timing_clock = "none";
    return;
  }
  r.timing_clock = std::string(kTpuEstimateClock);
  if (r.estimate->trusted)
    r.message += "; speed estimated from the TPU compiler's static figures: " + FormatSpeedup(r.estimate->speedup) +
                 " (not a measurement)";
  else
    r.message += "; the TPU estimate is not trusted, so speed earns nothing";
}

}  // namespace kernelgym
