// A process the judge calls into: the reference or the candidate's executor. The judge owns the
// clock: a call's wall time runs from just before it rings to just after it sees `done`, and the
// call's CPU time is the process's CPU clock as the kernel keeps it (all its threads) — nothing
// the called process writes about time is read. Owned and used by the judge's one thread.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <functional>
#include <string>

#include "tpu_runner/cpu/harness/doorbell.h"

namespace kernelgym {

double MonotonicNs();

class Side {
 public:
  Side() = default;
  Side(pid_t pid, Doorbell* bell);
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;
  Side(Side&&) = default;
  Side& operator=(Side&&) = default;

  struct Call {
    enum class Outcome {
      kDone,
      kDied,
      kCpuLimit,   // used its CPU-time limit
      kBlocked,    // past its limit in wall-clock time, and using (almost) no CPU: asleep
      kWallLimit,  // the wall-clock backstop
    };
    Outcome outcome = Outcome::kDone;
    double wall_ns = 0;
    double cpu_ns = 0;
    // CPU time the process used since its previous call returned, and the wall time that
    // passed meanwhile: an idle process uses next to none.
    double idle_cpu_ns = 0;
    double idle_wall_ns = 0;
    bool ok() const { return outcome == Outcome::kDone; }
  };

  // Rings for one call and waits for it: until `done` says so, the process dies, it has used
  // `cpu_limit_ns` of CPU time in this call, it is asleep past that limit, or `wall_limit_ns`
  // passed. With `at_done`, the moment the judge sees `done` is also the moment the call's
  // results are taken: the clock stops, the process is stopped (SIGSTOP, every thread of it,
  // waited for), `at_done` runs (copies the outputs), and only then is it continued — nothing
  // it does after `done` was seen can reach what `at_done` took.
  Call Ring(CallOp op, uint32_t shape_set, uint32_t input_set, double cpu_limit_ns, double wall_limit_ns,
            const std::function<void()>& at_done = {});

  // Waits until the process says it is ready or dies; false when it died or the time ran out.
  bool AwaitReady(double wall_limit_ns);

  double CpuNs() const;  // the process's CPU time so far (all threads); 0 when unreadable
  // After a call: until a thread of the process sleeps on `go` (at most kAsleepWaitNs), so that
  // its CPU clock holds the whole call (side.cc says why).
  void AwaitAsleep();
  static constexpr double kAsleepWaitNs = 200'000;
  bool Exited();         // reaps it when it has exited
  int wait_status() const { return wait_status_; }
  void Kill();           // SIGKILL and reap
  pid_t pid() const { return pid_; }
  Doorbell* bell() const { return bell_; }

 private:
  // SIGSTOP, then waits until every thread of the process has stopped; false when it died first.
  bool StopAndWait();

  pid_t pid_ = -1;
  Doorbell* bell_ = nullptr;
  clockid_t cpu_clock_{};
  bool have_cpu_clock_ = false;
  bool reaped_ = false;
  int wait_status_ = 0;
  uint32_t seq_ = 0;
  double cpu_after_last_call_ = -1;
  double wall_after_last_call_ = 0;
};

}  // namespace kernelgym
