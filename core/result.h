// The record one evaluation produces: the stage it reached, a status, messages, raw data.
// Expected failures (a compile error, a wrong answer, a crash, a timeout) are values here,
// never exceptions. docs/results.md documents every status.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernelgym {

enum class Stage { kStaticCheck, kCompile, kSymbolCheck, kCorrectness, kTiming, kProfile, kDone };

enum class Status {
  kOk,                // correct and timed
  kRejected,          // static check or symbol policy refused the source / shared object
  kCompileError,      // the compiler reported errors (or hit its limits)
  kIncorrect,         // wrong values, poison left in outputs, inputs written, nondeterminism
  kCrashed,           // the kernel died (signal, exit, uncaught exception)
  kTimeout,           // wall-clock deadline or CPU limit
  kSandboxViolation,  // a forbidden system call, stopped by seccomp
  kImplausible,       // faster than this machine's physical floor
  kInternalError,     // the environment failed (task bug, harness failure): not the kernel's fault
};

std::string_view StageName(Stage stage);
std::string_view StatusName(Status status);
std::optional<Status> ParseStatus(std::string_view name);
std::optional<Stage> ParseStage(std::string_view name);

struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string severity;  // error, warning, note
  std::string message;
};

// One compiler optimization remark about a loop of the kernel (from -fopt-info-vec).
struct Remark {
  int line = 0;
  int column = 0;
  bool vectorized = false;
  std::string message;
};

struct OutputCheck {
  std::string output;  // tensor name
  int64_t elements = 0;
  int64_t mismatches = 0;
  int64_t non_finite = 0;  // NaN/Inf where the expected value was finite (poison left behind)
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t first_mismatch = -1;  // flat index
  std::vector<int64_t> first_mismatch_index;  // multi-index
  double expected = 0;
  double actual = 0;
  bool passed() const { return mismatches == 0; }
};

struct CorrectnessReport {
  int trials_run = 0;  // trials whose outputs were judged (a failing trial counts)
  std::vector<uint64_t> seeds;
  std::vector<OutputCheck> checks;  // the worst (first failing, else last) check per output
  bool deterministic = true;
};

struct TimingSample {
  double reference_ns = 0;
  double candidate_ns = 0;
  double reference_cpu_ns = 0;
  double candidate_cpu_ns = 0;
  int input_set = 0;
  bool candidate_first = false;
  bool discarded = false;  // preempted (wall time well above CPU time)
};

struct TimeStats {
  double median_ns = 0, p10_ns = 0, p90_ns = 0, min_ns = 0, cv = 0;
};

// How busy the host was around a timing window, read from /proc by the runner just before and just
// after it. Context for judging how far a speedup can be trusted on a shared machine; no reward
// reads it.
struct HostLoad {
  bool sampled = false;       // false: /proc was unreadable, the fields are 0
  int cpus = 0;               // online CPUs
  double load_avg_1m = 0;     // /proc/loadavg after the window
  int procs_running = 0;      // runnable tasks, the more of the two readings (the runner itself counts)
  double busy_fraction = 0;   // of all CPUs' time over the window, the harness's own included
  double steal_fraction = 0;  // of all CPUs' time over the window, taken by the hypervisor
};

struct TimingReport {
  TimeStats reference;
  TimeStats candidate;
  double speedup = 0;  // median over rounds of reference/candidate
  double speedup_ci_low = 0, speedup_ci_high = 0;  // 95%
  bool converged = false;  // CI within the target before the budget ran out
  int rounds = 0;
  int discarded = 0;
  double seconds = 0;
  double reference_alone_median_ns = 0;  // timed before the candidate was loaded
  HostLoad host;
  // How the judge, the reference and the candidate were scheduled in the timing window: "rr:1"
  // (real-time, so that no other process slices into a timed call) or "normal" (the details say
  // why). Empty in records from before it was reported.
  std::string scheduling;
  std::vector<TimingSample> samples;
};

struct ProfileReport {
  double achieved_gflops = 0, achieved_gbps = 0;
  double peak_gflops = 0, peak_gbps = 0;     // this machine, for the task's thread count
  double fraction_of_peak = 0;               // of the bound resource
  std::string bound;                          // "memory" or "compute"
  double arithmetic_intensity = 0;            // flops per byte
  double floor_ns = 0;                        // the physical floor
  std::map<std::string, double> counters;     // per candidate call: task_clock_ns, page_faults, ...
  std::vector<std::string> unavailable_counters;
  std::vector<Remark> remarks;
};

// One Mosaic kernel of a pallas candidate as the TPU compiler scheduled it (a deviceless compile
// on hosts without a TPU): what a profiler's trace would show, known before anything runs.
struct TpuKernelProfile {
  std::string kernel;
  double grid_steps = 0;
  double bundles_per_step = 0;               // instruction bundles the schedule issues per grid step
  double estimated_cycles = 0;               // the compiler's static estimate for the whole kernel
  std::map<std::string, double> unit_share;  // share of bundles issuing mxu, vpu, xlu, load_store, dma work
  double critical_path_cycles = 0;           // 0: not reported
};

// The speed signal where no clock of the target ran (pallas off a TPU): the TPU compiler's static
// figures for the candidate's program and the reference's. An estimate, never a measurement, and
// labelled so wherever it appears (the wire form carries "label": "estimate").
struct SpeedEstimate {
  std::string method;              // how the candidate's time was estimated ("" when it was not)
  double candidate_us = 0;         // estimated device time of the candidate's program; 0: none
  double reference_us = 0;         // of the task's reference; 0: none
  bool candidate_trusted = false;  // the estimator's own view of each figure
  bool reference_trusted = false;
  double speedup = 0;              // reference_us / candidate_us when both are > 0, else 0
  // The verdict, made in one place (the backend's, beside the evaluation's status): this speedup
  // may be paid. When false, `reasons` says why.
  bool trusted = false;
  std::vector<std::string> reasons;
  bool operator==(const SpeedEstimate&) const = default;
};

struct EvalResult {
  std::string task_id;
  std::string backend;
  Status status = Status::kInternalError;
  Stage stage = Stage::kStaticCheck;  // the last stage entered
  std::string message;                 // one line: why this status
  std::vector<std::string> details;    // further lines (stderr head, limits, ...)
  std::vector<Diagnostic> diagnostics;
  bool compile_cached = false;
  std::optional<CorrectnessReport> correctness;
  std::optional<TimingReport> timing;
  std::optional<ProfileReport> profile;
  // Whether `timing` is the target device's own clock. False where no clock of the target ran
  // (pallas without a TPU): the result then has no timing, speed earns no reward, and
  // `timing_note` says why. `timing_clock` names the clock that ran: "cpu" (the cpu backend's
  // wall and CPU time), "tpu_device" (profiler device events), "none".
  bool timing_representative = true;
  std::string timing_clock;
  std::string timing_note;
  // The speed estimate where no clock of the target ran (see SpeedEstimate, RewardableSpeedupOf).
  std::optional<SpeedEstimate> estimate;
  // Other labelled estimates and compile facts, never measurements and never paid for (the TPU
  // executable's memory, the reference's flops, XLA's cost-model time, ...).
  std::map<std::string, double> estimates;
  std::vector<TpuKernelProfile> tpu_profile;   // pallas: the compiler's static profile per kernel
  std::map<std::string, bool> protections;     // which sandbox protections were on
  std::map<std::string, double> stage_seconds; // wall time per stage
  double seconds = 0;
};

// The timing_clock of a result whose speed signal is the TPU compiler's static estimate (pallas on
// a host without a TPU): not a measurement, and labelled so wherever it appears.
inline constexpr std::string_view kTpuEstimateClock = "tpu_estimate";

// What a speed reward may pay for: the measured speedup of a correct result timed on the target's
// own clock, or, where no such clock ran (timing_clock kTpuEstimateClock), the estimate's speedup
// when its verdict trusts it (`estimate->trusted`: decided by the backend, read here). Never the two
// mixed: a reward compares a speedup only with earlier ones of the same kind.
enum class SpeedupKind { kNone, kMeasured, kEstimated };
struct RewardableSpeedup {
  double value = 0;  // > 0 and finite unless kind is kNone
  SpeedupKind kind = SpeedupKind::kNone;
};
RewardableSpeedup RewardableSpeedupOf(const EvalResult& result);
std::string_view SpeedupKindName(SpeedupKind kind);  // "none", "measured", "estimated"

// What the null backend answers for any kernel (tpu_runner/null/null_backend.h, and the server's own
// null): ok at speedup 1, nothing compiled or run.
EvalResult NullBackendResult(const std::string& task_id);

}  // namespace kernelgym
