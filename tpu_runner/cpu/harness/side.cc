#include "tpu_runner/cpu/harness/side.h"

#include <sched.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

namespace kernelgym {
namespace {

// How long the judge sleeps between looks at a call that has not finished: the latency with
// which a death or a limit is noticed. A call that finishes wakes the judge at once.
constexpr int64_t kPollSliceNs = 10'000'000;
constexpr double kBlockedWindowNs = 1e9;
constexpr double kBlockedCpuFraction = 0.01;

}  // namespace

double MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

Side::Side(pid_t pid, Doorbell* bell) : pid_(pid), bell_(bell) {
  have_cpu_clock_ = clock_getcpuclockid(pid, &cpu_clock_) == 0;
}

double Side::CpuNs() const {
  timespec ts;
  if (!have_cpu_clock_ || clock_gettime(cpu_clock_, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

bool Side::Exited() {
  if (reaped_) return true;
  if (pid_ <= 0) return true;
  const pid_t r = waitpid(pid_, &wait_status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return reaped_;
}

void Side::Kill() {
  if (pid_ <= 0 || reaped_) return;
  kill(pid_, SIGKILL);
  if (waitpid(pid_, &wait_status_, 0) == pid_) reaped_ = true;
}

bool Side::AwaitReady(double wall_limit_ns) {
  const double start = MonotonicNs();
  while (bell_->ready.load(std::memory_order_acquire) == 0) {
    if (Exited() || MonotonicNs() - start > wall_limit_ns) return false;
    FutexWait(&bell_->ready, 0, kPollSliceNs);
  }
  cpu_after_last_call_ = CpuNs();
  wall_after_last_call_ = MonotonicNs();
  return true;
}

void Side::AwaitAsleep() {
  // Under RLIMIT_CPU Linux reads a process's CPU clock from its group CPU timer, which gets a
  // running thread's time only at a scheduler tick or when the thread sleeps. Read while the
  // process is still on its way from `done` to its wait for the next call, the clock can miss up
  // to a tick (4 ms) of the call — which the next interval would then count as CPU used between
  // calls (an honest single-threaded starter was failed so, under load). So the clock is read
  // once a thread sleeps on `go`: FUTEX_WAKE says whether one was waiting (the woken thread finds
  // `go` unchanged and sleeps again). Bounded: a process that never waits is read after
  // kAsleepWaitNs, as before. Reading later can only move CPU time from "between calls" into the
  // call, by at most that bound.
  const double start = MonotonicNs();
  while (FutexWakeOne(&bell_->go) <= 0) {
    if (MonotonicNs() - start > kAsleepWaitNs || Exited()) return;
    sched_yield();
  }
}

bool Side::StopAndWait() {
  if (kill(pid_, SIGSTOP) != 0) return false;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r != pid_) return false;
    if (WIFSTOPPED(status)) return true;
    wait_status_ = status;  // it exited or was killed before it stopped
    reaped_ = true;
    return false;
  }
}

Side::Call Side::Ring(CallOp op, uint32_t shape_set, uint32_t input_set, double cpu_limit_ns, double wall_limit_ns,
                      const std::function<void()>& at_done) {
  Call call;
  bell_->op = static_cast<uint32_t>(op);
  bell_->shape_set = shape_set;
  bell_->input_set = input_set;
  const uint32_t seq = ++seq_;
  const double c0 = CpuNs();
  const double t0 = MonotonicNs();
  if (cpu_after_last_call_ >= 0) {
    call.idle_cpu_ns = c0 - cpu_after_last_call_;
    call.idle_wall_ns = t0 - wall_after_last_call_;
  }
  bell_->go.store(seq, std::memory_order_release);
  FutexWakeAll(&bell_->go);
  // A call that sleeps (blocks on a futex, waits forever) uses no CPU time: once it has run
  // longer than its CPU limit in wall-clock time and used almost no CPU in the last second, it is
  // blocked, not starved. (A starved process on a busy machine still gets its share.)
  double window_wall = t0, window_cpu = c0;
  for (;;) {
    const uint32_t done = bell_->done.load(std::memory_order_acquire);
    if (done == seq) break;
    FutexWait(&bell_->done, done, kPollSliceNs);
    if (bell_->done.load(std::memory_order_acquire) == seq) break;
    // Not finished within a slice (or a spurious wake): is it still alive, within its limits?
    const double now = MonotonicNs();
    if (Exited()) {
      call.outcome = Call::Outcome::kDied;
    } else if (CpuNs() - c0 > cpu_limit_ns) {
      call.outcome = Call::Outcome::kCpuLimit;
    } else if (now - t0 > wall_limit_ns) {
      call.outcome = Call::Outcome::kWallLimit;
    } else if (now - window_wall >= kBlockedWindowNs) {
      const double cpu = CpuNs();
      const bool blocked = now - t0 > cpu_limit_ns && cpu - window_cpu < kBlockedCpuFraction * (now - window_wall);
      window_wall = now;
      window_cpu = cpu;
      if (!blocked) continue;
      call.outcome = Call::Outcome::kBlocked;
    } else {
      continue;
    }
    call.wall_ns = now - t0;
    call.cpu_ns = CpuNs() - c0;
    return call;
  }
  const double t1 = MonotonicNs();
  if (at_done) {
    // The outputs are taken now, with the process stopped: a thread of it that goes on after
    // writing `done` (the page is writable in its process) finds the outputs already read.
    if (!StopAndWait()) {
      call.outcome = Call::Outcome::kDied;
      call.wall_ns = t1 - t0;
      call.cpu_ns = CpuNs() - c0;
      return call;
    }
    at_done();
    kill(pid_, SIGCONT);
  }
  AwaitAsleep();
  const double c1 = CpuNs();
  call.wall_ns = t1 - t0;
  call.cpu_ns = c1 - c0;
  cpu_after_last_call_ = c1;
  wall_after_last_call_ = t1;
  return call;
}

}  // namespace kernelgym
