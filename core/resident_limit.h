// What a process tree holds in memory, and a watchdog that ends a tree holding more than a limit.
// RLIMIT_AS bounds address space, not memory: a helper that must reserve much more than it uses
// (XLA) gets a generous one, which bounds nothing resident on a smaller host, where the kernel's
// OOM killer would then pick a victim of its own. A cgroup's memory.max would be exact, but needs a
// delegated cgroup v2 memory controller, which hosts do not all give (a hybrid v1 host, a runner
// without privileges); this watchdog needs nothing but /proc.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace kernelgym {

// Bytes of memory `root` and every process under it hold now: each process's proportional set
// size (PSS: a page shared by N processes counts 1/N to each, so a forked child's pages shared
// with its parent are not counted twice), from /proc/PID/smaps_rollup; a process whose
// smaps_rollup cannot be read (a kernel before 4.14, a process that is not dumpable) counts its
// resident set (/proc/PID/statm). nullopt when `root` is gone.
std::optional<std::uint64_t> ProcessTreeResidentBytes(pid_t root);

// Watches `root`'s tree on a thread of its own, every `every`, and SIGKILLs `root` the first time
// the tree holds more than `limit_bytes`. Ending the root must end the tree (a sandbox's
// --die-with-parent and pid namespace do; so does a process without children). The signal goes
// through a pidfd, so it cannot reach another process that got the pid after the root was
// reaped; where the kernel has none (before 5.3) it goes to the pid. The watch stops by itself
// when the root exits. Between two readings a tree can grow by what it allocates in `every`
// (~0.3 GB in 0.1 s for one thread writing fresh pages here).
class ResidentLimit {
 public:
  static constexpr std::chrono::milliseconds kEvery{100};

  ResidentLimit(pid_t root, std::uint64_t limit_bytes, std::chrono::milliseconds every = kEvery);
  ResidentLimit(const ResidentLimit&) = delete;
  ResidentLimit& operator=(const ResidentLimit&) = delete;
  // Stops watching; the tree is left as it is.
  ~ResidentLimit();

  std::uint64_t limit_bytes() const { return limit_; }
  // Whether the watchdog ended the tree, and what the tree held at the reading that did it.
  bool exceeded() const { return exceeded_.load(std::memory_order_acquire); }
  std::uint64_t held_bytes() const { return held_.load(std::memory_order_acquire); }
  // The most any reading found.
  std::uint64_t peak_bytes() const { return peak_.load(std::memory_order_acquire); }

 private:
  void Watch(std::chrono::milliseconds every);
  bool RootExited() const;
  void KillRoot();

  pid_t root_;
  int pidfd_ = -1;
  std::uint64_t limit_;
  std::atomic<bool> exceeded_{false};
  std::atomic<std::uint64_t> held_{0}, peak_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;     // last: started once everything above is set
};

// "6 GiB", "1.5 GiB", "512 MiB": an amount of memory as a person reads it.
std::string MemoryAmount(std::uint64_t bytes);

}  // namespace kernelgym
