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
#include <vector>

namespace kernelgym {

// The memory `root` and every process under it hold now, counting what no disk file backs:
// anonymous memory (heaps, arrays) and shared memory (tmpfs and memfd pages they map), and the
// files they hold in memory without mapping them: what each tmpfs of their view holds that the
// runner's own view has not (a sandbox's /, /tmp, /dev), and each memfd they hold open. Pages of
// disk files are left out: the kernel can drop clean ones, and what the libraries' pages cost
// does not grow with what a candidate does. A tmpfs file or memfd that is also mapped counts
// twice. nullopt when `root` is gone.
//
// Resident: each process's RssAnon + RssShmem (/proc/PID/status: counters, cheap). A page that
// two processes of the tree share (a forked job's copy-on-write pages of its fork server's)
// counts for each: an upper bound.
std::optional<std::uint64_t> ProcessTreeResidentBytes(pid_t root);
// Proportional: each process's Pss_Anon + Pss_Shmem (/proc/PID/smaps_rollup), so a shared page
// counts once over the processes that map it. Exact, but the kernel walks every page table to
// answer: ~40 ms for a judge's tree here. A process whose smaps_rollup cannot be read (not
// dumpable, a kernel before 5.1) counts its resident bytes.
std::optional<std::uint64_t> ProcessTreeProportionalBytes(pid_t root);

// Watches `root`'s tree on a thread of its own, every `every`, and SIGKILLs `root` the first time
// the tree holds more than `limit_bytes`: its resident bytes, and when those pass the limit, its
// proportional bytes (so the costly reading is taken only near the limit, and a fork server's
// pages its job shares do not end the job). Ending the root must end the tree (a sandbox's
// --die-with-parent and pid namespace do; so does a process without children). The signal goes
// through a pidfd, so it cannot reach another process that got the pid after the root was
// reaped; where the kernel has none (before 5.3) it goes to the pid. The watch stops by itself
// when the root exits. Between two readings a tree can grow by what it allocates in `every`.
class ResidentLimit {
 public:
  static constexpr std::chrono::milliseconds kEvery{100};
  // How often the tree's processes are looked for again (a scan of all of /proc); the readings
  // between two scans read the processes found by the last one.
  static constexpr std::chrono::milliseconds kScanEvery{500};

  ResidentLimit(pid_t root, std::uint64_t limit_bytes, std::chrono::milliseconds every = kEvery);
  ResidentLimit(const ResidentLimit&) = delete;
  ResidentLimit& operator=(const ResidentLimit&) = delete;
  // Stops watching; the tree is left as it is.
  ~ResidentLimit();

  std::uint64_t limit_bytes() const { return limit_; }
  // Whether the watchdog ended the tree, and what the tree held (proportional bytes) at the
  // reading that did it.
  bool exceeded() const { return exceeded_.load(std::memory_order_acquire); }
  std::uint64_t held_bytes() const { return held_.load(std::memory_order_acquire); }
  // The most any reading found (resident bytes; proportional ones where those were read).
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
