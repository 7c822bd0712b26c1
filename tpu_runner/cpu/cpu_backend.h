// The `cpu` backend: C++ kernels compiled with g++ into a shared object and run in the
// sandboxed harness next to the task's libtorch reference. This class is the runner side: it
// never loads libtorch or candidate code itself, it spawns and judges.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "tpu_runner/backend.h"
#include "tpu_runner/cpu/compiler.h"
#include "tpu_runner/cpu/harness_session.h"
#include "tpu_runner/cpu/harness_zygote.h"
#include "tpu_runner/peaks.h"

namespace kernelgym {

// Evaluations in any number of threads and processes that share `cache_dir` compile in parallel
// but run their timed harness sessions (correctness + timing) one at a time (HostTimingLock in
// cpu_backend.cc); the wait is reported as stage_seconds["timing_lock_wait"]. Untimed sessions
// (correctness only) run off the timing CPUs without the lock.
class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& config);
  std::string name() const override { return "cpu"; }
  EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) override;

 private:
  const MachinePeaks* Peaks();
  // A harness for `threads`: forked from the zygote (config.reference_zygote), or the pre-started
  // one when it matches and is alive, else a new one
  // (a multi-threaded one starts on the timing CPUs: call it only under the host's timing lock).
  std::unique_ptr<HarnessProcess> TakeHarness(int threads, std::string& error);
  // Starts the next evaluation's harness now, off the timing CPUs (single-threaded tasks only:
  // a multi-threaded libtorch may start threads at load, which would keep the wrong CPUs); with
  // the zygote, starts the zygote if it is not running (loading libtorch between evaluations).
  void PrestartHarness();

  BackendConfig config_;
  Compiler compiler_;
  std::filesystem::path harness_program_, peaks_program_;
  std::mutex spare_mutex_;
  std::unique_ptr<HarnessProcess> spare_;  // guarded by spare_mutex_
  // By thread count (config.reference_zygote): the warm parents of each evaluation's judge and
  // reference. A zygote that cannot start at all leaves the backend spawning references as before.
  std::mutex zygote_mutex_;
  std::map<int, std::unique_ptr<HarnessZygote>> zygotes_;  // guarded by zygote_mutex_
  HarnessZygote& Zygote(int threads);                       // call with zygote_mutex_ held
  std::once_flag peaks_once_;  // peaks are measured at most once per backend, by the first caller
  std::optional<MachinePeaks> peaks_;
  std::string peaks_error_;
};

}  // namespace kernelgym
