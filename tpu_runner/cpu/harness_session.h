// One run of kernelgym-harness, seen from the runner: spawn it in the sandbox, feed it the job,
// judge the correctness trials from the frames it sends (against the expected outputs it sent
// before any candidate code was loaded), watch its deadlines, and say what happened.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/subprocess.h"
#include "datasets/task.h"
#include "tpu_runner/backend.h"

namespace kernelgym {

struct HarnessRun {
  Status status = Status::kInternalError;  // kOk when correctness passed (and timing, if run, finished)
  Stage stage = Stage::kCorrectness;
  std::string message;
  std::vector<std::string> details;
  CorrectnessReport correctness;
  std::vector<TimingSample> samples;
  double timing_seconds = 0;
  double reference_alone_ns = 0;
  std::map<std::string, double> counters;
  std::vector<std::string> unavailable_counters;
  std::map<std::string, bool> protections;
  double correctness_seconds = 0;
  // The CPU time the reference's process used before it could take its job: loading libtorch
  // (~0.5-0.7 s) when spawned, next to nothing when forked from a warm zygote. -1: not reported.
  double reference_start_cpu_seconds = -1;
  // How the timing window was scheduled ("rr:1" or "normal"; the judge raises it for all three
  // processes or for none: harness_main.cc), and why not when it stayed normal.
  std::string timing_scheduling;
  std::string timing_priority_error;
};

// The harness's process as the session drives it: spawned by the runner in a sandbox of its own
// (StartHarness), or forked warm by a zygote (harness_zygote.h). Owned by one thread.
class HarnessChild {
 public:
  virtual ~HarnessChild() = default;
  virtual int stdout_fd() const = 0;
  virtual int stderr_fd() const = 0;
  virtual void DrainOutput() = 0;  // whatever stdout/stderr has ready, non-blocking
  // SIGKILL to the judge; its reference and executor die with it.
  virtual void Kill() = 0;
  // Waits for its end; false when the deadline passed first (it is left running).
  virtual bool Wait(std::chrono::steady_clock::time_point deadline) = 0;
  virtual int exit_code() const = 0;  // -1 when killed by a signal
  virtual int signal() const = 0;
  virtual const std::string& stderr_text() const = 0;
};

// A started harness waiting for its job: libtorch loaded, nothing else in the process yet.
// Starting one costs ~0.45 s (the dynamic loader, mostly), so the backend starts the next one
// while the caller is busy elsewhere (compiling, thinking) and hands it the next evaluation.
// The candidate's shared object arrives later through `slot_dir`, which is bound into the
// sandbox. Owned by one thread; destroying it kills the process and removes the slot.
struct HarnessProcess {
  HarnessProcess() = default;
  HarnessProcess(const HarnessProcess&) = delete;
  HarnessProcess& operator=(const HarnessProcess&) = delete;
  ~HarnessProcess();

  bool Running();  // false when it has died since it started
  // Waits (at most `seconds`) until the harness has reported anything: its first report says
  // that the reference process has loaded libtorch. The runner calls it before it takes the
  // host's timing lock, so that the lock is not held while libtorch loads. Reads nothing: the
  // session sees every frame. False when the time ran out.
  bool AwaitWarm(double seconds) const;

  std::unique_ptr<HarnessChild> child;
  int control_fd = -1;  // runner -> harness (a socket, so writes cannot raise SIGPIPE)
  int report_fd = -1;   // harness -> runner
  std::filesystem::path slot_dir;  // the kernel goes here as kernel.so
  std::string slot_in_sandbox;     // the same folder as the harness sees it
  int threads = 1;
};

// Starts a harness pinned to `cpus` (it moves itself to the job's CPUs when the job arrives).
// nullptr with `error` set when it cannot start.
std::unique_ptr<HarnessProcess> StartHarness(const std::filesystem::path& harness_program,
                                             const std::filesystem::path& scratch_root, int threads,
                                             const std::vector<int>& cpus, std::string& error);

// The environment every harness runs with (the task's thread count only changes numbers).
std::vector<std::string> HarnessEnvironment(int threads);
// Where the harness sees `name` (one of the three programs in `tools_dir`).
std::string HarnessToolPath(const std::filesystem::path& tools_dir, const std::string& name);
// How a harness's sandbox is spawned (a per-evaluation one, or a zygote's: harness_zygote.h): the
// three programs bound read-only, `slot` at `slot_inside`, the harness's environment and limits.
SpawnOptions HarnessSpawnOptions(const std::filesystem::path& tools_dir, const std::filesystem::path& slot,
                                 const std::string& slot_inside, int threads, const std::vector<std::string>& argv);

// How many correctness trials an evaluation of `task` runs (and the runner insists on seeing):
// the task's `trials` on the timed sizes, and two on each of its check_sizes.
int CorrectnessTrialCount(const Task& task);

// Runs one evaluation's correctness trials (and timing) in `process`, which it consumes.
HarnessRun RunHarnessSession(const Task& task, const std::filesystem::path& shared_object,
                             std::unique_ptr<HarnessProcess> process, const EvalOptions& options);

}  // namespace kernelgym
