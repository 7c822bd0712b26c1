#include "tpu_runner/cpu/cpu_backend.h"

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <optional>

#include "tpu_runner/cpu/harness_session.h"
#include "tpu_runner/machine.h"
#include "tpu_runner/sandbox.h"
#include "tpu_runner/cpu/static_check.h"
#include "tpu_runner/cpu/symbol_policy.h"
#include "tpu_runner/timing_stats.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// How long a runner waits, before it takes the timing lock, for its harness's reference process
// to load libtorch (~0.45 s quiet). Past it, the session goes on under the lock and its own
// deadlines say what went wrong.
constexpr double kHarnessWarmSeconds = 60;

// Correctness and timing (the harness session) run one at a time per host, across runner
// processes: a second session next to a timing one disturbs its measurements (PLATFORM.md: a
// busy loop on the same core multiplies wall times by 5; other cores still share caches and
// memory bandwidth). Compiles run in parallel. flock(2) on <cache_dir>/timing.lock: the runners
// of a host share the cache folder, and the kernel drops the lock when its holder dies.
class HostTimingLock {
 public:
  explicit HostTimingLock(const fs::path& cache_dir) {
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    const fs::path file = cache_dir / "timing.lock";
    fd_ = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error_ = "cannot open " + file.string() + ": " + std::strerror(errno);
      return;
    }
    int rc;
    do rc = flock(fd_, LOCK_EX); while (rc != 0 && errno == EINTR);
    if (rc != 0) error_ = "cannot lock " + file.string() + ": " + std::strerror(errno);
  }
  ~HostTimingLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  HostTimingLock(const HostTimingLock&) = delete;
  HostTimingLock& operator=(const HostTimingLock&) = delete;

  // Empty when held; otherwise the session runs unserialized and the result says so.
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

std::string Format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

}  // namespace

CpuBackend::CpuBackend(const BackendConfig& config)
    : config_(config),
      compiler_(CompilerConfig{.cache_dir = config.cache_dir}),
      harness_program_(fs::path(config.tools_dir) / "kernelgym-harness"),
      peaks_program_(fs::path(config.tools_dir) / "kernelgym-peaks") {}

const MachinePeaks* CpuBackend::Peaks() {
  std::call_once(peaks_once_, [this] { peaks_ = LoadOrMeasurePeaks(config_.cache_dir, peaks_program_, peaks_error_); });
  return peaks_ ? &*peaks_ : nullptr;
}

HarnessZygote& CpuBackend::Zygote(int threads) {
  std::unique_ptr<HarnessZygote>& zygote = zygotes_[threads];
  if (!zygote) zygote = std::make_unique<HarnessZygote>(config_.tools_dir, fs::path(config_.cache_dir) / "scratch", threads);
  return *zygote;
}

std::unique_ptr<HarnessProcess> CpuBackend::TakeHarness(int threads, std::string& error) {
  // The judge is pinned as the spawned one would be (below); its reference is its child.
  const std::vector<int> cpus = threads <= 1 ? NonTimingCpus(1) : TimingCpus(threads);
  if (config_.reference_zygote) {
    std::lock_guard lock(zygote_mutex_);
    HarnessZygote& zygote = Zygote(threads);
    if (!zygote.Broken()) {
      std::string zygote_error;
      if (auto forked = zygote.Fork(cpus, zygote_error)) return forked;
      // A zygote that cannot start here says why once; from then on every evaluation's
      // reference loads libtorch itself, as before.
      if (zygote.Broken()) std::fprintf(stderr, "kernelgym cpu: no warm reference: %s\n", zygote_error.c_str());
    }
  }
  {
    std::lock_guard lock(spare_mutex_);
    if (spare_ && spare_->threads == threads && spare_->Running()) return std::move(spare_);
    spare_.reset();
  }
  // One thread: start off the timing CPU, as PrestartHarness does (the harness moves to the job's
  // CPUs when the job arrives), so that starting it never disturbs another runner's timing.
  return StartHarness(harness_program_, fs::path(config_.cache_dir) / "scratch", threads, cpus, error);
}

void CpuBackend::PrestartHarness() {
  if (config_.reference_zygote) {
    std::lock_guard lock(zygote_mutex_);
    std::string error;
    if (Zygote(1).EnsureStarted(error)) return;
    // No zygote here: a spare harness, as without one.
  }
  std::lock_guard lock(spare_mutex_);
  if (spare_) return;
  std::string error;
  spare_ = StartHarness(harness_program_, fs::path(config_.cache_dir) / "scratch", 1, NonTimingCpus(1), error);
}

EvalResult CpuBackend::Evaluate(const Task& task, const std::string& source, const EvalOptions& options) {
  const auto start = Clock::now();
  EvalResult result;
  result.task_id = task.id;
  result.backend = name();
  auto finish = [&](Status status, Stage stage, std::string message) {
    result.status = status;
    result.stage = stage;
    result.message = std::move(message);
    result.seconds = Since(start);
    return result;
  };

  // 1. Static checks.
  auto t = Clock::now();
  StaticCheckResult check = CheckSource(source, task.policy);
  result.stage_seconds["static_check"] = Since(t);
  if (!check.ok) {
    result.diagnostics = check.diagnostics;
    return finish(Status::kRejected, Stage::kStaticCheck, check.message);
  }

  // One-shot use: the harness starts now, off the timing CPUs as a pre-started one does, and its
  // reference loads libtorch while the candidate compiles (config.start_harness_before_compile).
  std::string harness_error;
  std::unique_ptr<HarnessProcess> harness;
  if (config_.start_harness_before_compile && task.threads <= 1) harness = TakeHarness(task.threads, harness_error);

  // 2. Compile (sandboxed, cached).
  t = Clock::now();
  CompileResult compiled = compiler_.Compile(source, task);
  result.stage_seconds["compile"] = Since(t);
  result.compile_cached = compiled.cached;
  result.diagnostics = compiled.diagnostics;
  result.details = compiled.details;
  if (compiled.status != Status::kOk) return finish(compiled.status, Stage::kCompile, compiled.message);
  // The compiler's vectorization remarks are useful to a policy whatever happens next.
  result.profile = ProfileReport{};
  result.profile->remarks = compiled.remarks;

  // 3. Symbol policy.
  t = Clock::now();
  SymbolCheckResult symbols = CheckSymbolPolicy(compiled.shared_object, task.policy);
  result.stage_seconds["symbol_check"] = Since(t);
  if (!symbols.ok) {
    for (const std::string& d : symbols.details) result.details.push_back(d);
    return finish(Status::kRejected, Stage::kSymbolCheck, symbols.message);
  }

  // 4 + 5. Correctness and timing in the sandboxed harness. A timed session holds the host's
  // timing lock, so no two timing windows overlap; an untimed one (correctness only) runs off the
  // timing CPUs and takes no lock — it cannot disturb a window there, and need not wait for one.
  t = Clock::now();
  const bool serialize = options.run_timing || task.threads > 1;  // see TakeHarness
  // A single-threaded harness starts off the timing CPU (like the pre-started one), so it needs
  // no lock; a multi-threaded one starts on the timing CPUs, so only once the lock is held.
  if (task.threads <= 1 && !harness && harness_error.empty()) harness = TakeHarness(task.threads, harness_error);
  // Not under the lock: the reference loading libtorch (a pre-started harness has done so).
  if (harness && serialize) harness->AwaitWarm(kHarnessWarmSeconds);
  HarnessRun run;
  HostLoad host_load;  // the host around the timing window, for judging how far the timing can be trusted
  const MachinePeaks* peaks = nullptr;
  {
    const auto wait_start = Clock::now();
    std::optional<HostTimingLock> lock;
    if (serialize) lock.emplace(config_.cache_dir);
    const auto locked = Clock::now();
    if (serialize) result.stage_seconds["timing_lock_wait"] = Since(wait_start);
    if (lock && !lock->error().empty())
      result.details.push_back("timing is not serialized with other runners: " + lock->error());
    // Peaks are measured once per machine, on the timing CPU: under the lock, like a session.
    peaks = options.run_timing ? Peaks() : nullptr;
    if (options.run_timing && !peaks)
      return finish(Status::kInternalError, Stage::kTiming, "cannot measure this machine's peaks: " + peaks_error_);
    if (!harness && harness_error.empty()) harness = TakeHarness(task.threads, harness_error);
    if (!harness) return finish(Status::kInternalError, Stage::kCorrectness, harness_error);
    const HostReading host_before = options.run_timing ? ReadHost() : HostReading{};
    run = RunHarnessSession(task, compiled.shared_object, std::move(harness), options);
    host_load = HostLoadBetween(host_before, options.run_timing ? ReadHost() : HostReading{}, OnlineCpus());
    if (lock && config_.on_timing_window) config_.on_timing_window(locked, Clock::now());
  }
  result.stage_seconds["harness"] = Since(t);
  if (config_.prestart_harness) PrestartHarness();
  result.stage_seconds["correctness"] = run.correctness_seconds;
  // ~0 when the reference was forked warm (the zygote), ~0.5-0.7 s when it loaded libtorch itself.
  if (run.reference_start_cpu_seconds >= 0) result.stage_seconds["reference_start_cpu"] = run.reference_start_cpu_seconds;
  result.stage_seconds["timing"] = run.timing_seconds;
  result.protections = run.protections;
  result.correctness = run.correctness;
  for (const std::string& d : run.details) result.details.push_back(d);
  if (run.status != Status::kOk) return finish(run.status, run.stage, run.message);
  if (!options.run_timing) return finish(Status::kOk, Stage::kCorrectness, "correct (not timed)");

  // Timing statistics from the raw samples.
  TimingReport timing;
  timing.samples = run.samples;
  timing.rounds = static_cast<int>(run.samples.size());
  timing.seconds = run.timing_seconds;
  timing.reference_alone_median_ns = run.reference_alone_ns;
  timing.host = host_load;
  timing.scheduling = run.timing_scheduling;
  if (!run.timing_priority_error.empty())
    result.details.push_back("timing: scheduled as the runner is, not real-time (" + run.timing_priority_error +
                             "): other processes on the timing CPU may have run inside the timed calls");
  // Every round counts (the judge discards none: a rule that picks rounds could be steered by
  // the candidate, docs/sandbox.md); the median and its order-statistic interval are robust to
  // the rounds another tenant disturbed.
  std::vector<double> ref, cand;
  std::vector<TimingSample> usable = run.samples;
  for (TimingSample& s : usable) {
    s.discarded = false;
    ref.push_back(s.reference_ns);
    cand.push_back(s.candidate_ns);
  }
  timing.reference = Summarize(ref);
  timing.candidate = Summarize(cand);
  RatioEstimate speedup = EstimateSpeedup(usable);
  if (speedup.median == 0 && !cand.empty() && timing.candidate.median_ns > 0) {
    // Too few rounds for an interval (the harness stops early only on max_rounds < 6).
    speedup.median = timing.reference.median_ns / timing.candidate.median_ns;
    result.details.push_back("timing: " + std::to_string(cand.size()) + " rounds, too few for a confidence interval");
  }
  timing.speedup = speedup.median;
  timing.speedup_ci_low = speedup.low;
  timing.speedup_ci_high = speedup.high;
  // Converged: the interval met its target on at least the minimum number of usable rounds (an
  // interval from the 6 rounds a budget allows a slow kernel can be tight by luck).
  timing.converged = speedup.median > 0 && speedup.relative_half_width <= options.timing.target_relative_ci &&
                     static_cast<int>(usable.size()) >= options.timing.min_rounds;
  result.timing = timing;
  result.timing_clock = "cpu";

  // 6. Physical floor and profile.
  t = Clock::now();
  ProfileReport profile = Roofline(task, *peaks, timing.candidate.median_ns);
  profile.remarks = compiled.remarks;
  profile.counters = run.counters;
  profile.unavailable_counters = run.unavailable_counters;
  result.profile = profile;
  result.stage_seconds["profile"] = Since(t);
  if (timing.candidate.median_ns < profile.floor_ns) {
    return finish(Status::kImplausible, Stage::kTiming,
                  Format("median time %.0f ns is below this machine's physical floor of %.0f ns "
                         "(max of flops / peak FLOP/s and bytes / peak bandwidth): the kernel skips work",
                         timing.candidate.median_ns, profile.floor_ns));
  }
  // The reference's speed next to the kernel versus alone is reported, not judged: interleaving
  // with any kernel that streams memory slows the reference somewhat, and a busy neighbour on the
  // machine slows it more, so a threshold would fail honest kernels. The known ways for a kernel
  // to slow the reference on purpose (threads, affinity, FP environment, OpenMP settings) are
  // closed by the symbol policy, seccomp and the harness resetting state around each call.
  if (run.reference_alone_ns > 0 && timing.reference.median_ns > 1.5 * run.reference_alone_ns)
    result.details.push_back(Format("note: the reference ran %.2fx slower interleaved with this kernel (%.0f ns) than alone (%.0f ns)",
                                    timing.reference.median_ns / run.reference_alone_ns, timing.reference.median_ns,
                                    run.reference_alone_ns));
  return finish(Status::kOk, Stage::kDone,
                Format("correct; speedup %.3fx over the reference (95%% CI %.3f-%.3f)", timing.speedup,
                       timing.speedup_ci_low, timing.speedup_ci_high));
}

}  // namespace kernelgym
