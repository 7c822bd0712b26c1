#include "core/resident_limit.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include "core/process_tree.h"

namespace kernelgym {
namespace {

// The whole of a small /proc file (smaps_rollup, statm: under a kilobyte).
std::optional<std::string> ReadProcFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return std::nullopt;
    }
    text.append(chunk, static_cast<std::size_t>(n));
  }
  close(fd);
  return text;
}

// PSS in bytes from smaps_rollup ("Pss:  1234 kB"), else the resident set from statm.
std::optional<std::uint64_t> ProcessResidentBytes(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  if (const std::optional<std::string> rollup = ReadProcFile(dir + "/smaps_rollup")) {
    const std::size_t at = rollup->find("\nPss:");
    unsigned long long kib = 0;
    if (at != std::string::npos && std::sscanf(rollup->c_str() + at + 5, "%llu", &kib) == 1) return kib << 10;
  }
  if (const std::optional<std::string> statm = ReadProcFile(dir + "/statm")) {
    unsigned long long size = 0, resident = 0;
    static const long kPage = sysconf(_SC_PAGESIZE);
    if (std::sscanf(statm->c_str(), "%llu %llu", &size, &resident) == 2)
      return resident * static_cast<unsigned long long>(kPage > 0 ? kPage : 4096);
  }
  return std::nullopt;  // it ended while the tree was read
}

}  // namespace

std::optional<std::uint64_t> ProcessTreeResidentBytes(pid_t root) {
  const std::vector<TreeProcess> tree = ProcessTree(root);
  if (tree.empty()) return std::nullopt;
  std::uint64_t total = 0;
  for (const TreeProcess& process : tree) total += ProcessResidentBytes(process.pid).value_or(0);
  return total;
}

ResidentLimit::ResidentLimit(pid_t root, std::uint64_t limit_bytes, std::chrono::milliseconds every)
    : root_(root), limit_(limit_bytes) {
#ifdef SYS_pidfd_open
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, root, 0));
#endif
  thread_ = std::thread([this, every] { Watch(every); });
}

ResidentLimit::~ResidentLimit() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (pidfd_ >= 0) close(pidfd_);
}

bool ResidentLimit::RootExited() const {
  if (pidfd_ < 0) return kill(root_, 0) != 0 && errno == ESRCH;
  pollfd fd{pidfd_, POLLIN, 0};  // a pidfd is readable once its process has exited
  return poll(&fd, 1, 0) > 0;
}

void ResidentLimit::KillRoot() {
#ifdef SYS_pidfd_send_signal
  if (pidfd_ >= 0) {
    syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
    return;
  }
#endif
  kill(root_, SIGKILL);
}

void ResidentLimit::Watch(std::chrono::milliseconds every) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const std::optional<std::uint64_t> held = ProcessTreeResidentBytes(root_);
    // Read after the tree: if the root was alive then, the pid read above was still its own.
    if (!held || RootExited()) return;
    if (*held > peak_.load(std::memory_order_relaxed)) peak_.store(*held, std::memory_order_release);
    if (*held > limit_) {
      held_.store(*held, std::memory_order_release);
      exceeded_.store(true, std::memory_order_release);  // before the kill: whoever sees the death sees why
      KillRoot();
      return;
    }
    lock.lock();
    wake_.wait_for(lock, every, [this] { return stopping_; });
  }
}

std::string MemoryAmount(std::uint64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= (std::uint64_t{1} << 30)) out << static_cast<double>(bytes) / static_cast<double>(1ull << 30) << " GiB";
  else out << static_cast<double>(bytes) / static_cast<double>(1ull << 20) << " MiB";
  return out.str();
}

}  // namespace kernelgym
