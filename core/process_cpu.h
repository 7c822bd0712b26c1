// What a process tree costs in CPU time, and a limit on it: a helper program is charged for the
// work it does, not for the time it waited for a CPU on a busy machine. A wall-clock backstop
// still ends one that sleeps or blocks; it too leaves out the time the tree waited for a CPU.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <unordered_map>

namespace kernelgym {

// CPU seconds (user + system) that `root` and every process under it have used: each process's
// threads summed, and the children each one has reaped (so a process's time is still counted
// after it ended, as long as its parent waited for it). Read from /proc. nullopt when `root` is
// gone.
std::optional<double> ProcessTreeCpuSeconds(pid_t root);

// How long each live thread of `root`'s tree has waited on a run queue for a CPU, in seconds, by
// thread id (/proc/PID/task/TID/schedstat): the time a busy machine took from it. Empty where
// the kernel keeps no schedstat, or `root` is gone.
std::unordered_map<pid_t, double> ProcessTreeRunQueueWaits(pid_t root);

// A limit on the CPU time a process tree spends from the moment it is made, beside a wall-clock
// backstop. The backstop counts wall-clock time less the longest any of the tree's threads waited
// for a CPU meanwhile: a process that sleeps or blocks runs into it, one that is slow only because
// the machine is busy does not (a thread that died takes its waiting along: then the backstop
// counts more, not less). The tree is read when Check is called, no more often than every
// `kCheckEvery`: a caller waits until NextCheck() for whatever else it waits for, then calls Check.
class CpuLimit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kCheckEvery{250};
  // However long the tree waited for a CPU, it ends at this many times the backstop on plain wall
  // time: a thread that lowers its own priority (SCHED_IDLE, nice 19) on a busy host waits nearly
  // all the time while spending nearly no CPU, and would otherwise hold its slot as long as the
  // host stays busy.
  static constexpr double kCeilingFactor = 10;
  enum class Passed { kNone, kCpu, kWall, kWallCeiling };

  CpuLimit(pid_t root, double cpu_seconds, double wall_seconds);

  // Whether a limit has passed now. A CPU reading over the limit is read again before it counts,
  // so that a child's time counted twice while its parent reaps it cannot end the tree. A tree
  // that is gone has spent nothing more.
  Passed Check();
  // Reads the tree's CPU time now (cpu_used), whenever the last reading was.
  void Measure();
  // When to call Check next: the next reading's time, or the wall deadline if that comes first.
  Clock::time_point NextCheck() const;

  double cpu_seconds() const { return cpu_limit_; }
  double wall_seconds() const { return wall_limit_; }
  // CPU seconds the tree spent since the limit was made, as last read; wall seconds since then.
  double cpu_used() const { return cpu_used_; }
  double wall_used() const;
  // The longest any thread waited for a CPU since the limit was made, as last read.
  double waited() const { return waited_; }

 private:
  std::optional<double> Spent() const;
  pid_t root_;
  double cpu_limit_, wall_limit_;
  double start_cpu_ = 0, cpu_used_ = 0, waited_ = 0;
  std::unordered_map<pid_t, double> start_waits_;
  Clock::time_point start_, next_check_;
};

}  // namespace kernelgym
