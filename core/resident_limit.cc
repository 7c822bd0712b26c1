#include "core/resident_limit.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/process_tree.h"

namespace kernelgym {
namespace {

// The whole of a small /proc file (status, smaps_rollup: a few kilobytes).
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

// The number after `field` ("RssAnon:\t  1234 kB", at a line's start) in kB, as bytes.
std::optional<std::uint64_t> KibField(const std::string& text, const std::string& field) {
  std::size_t at = text.rfind("\n" + field);
  at = at == std::string::npos ? (text.rfind(field, 0) == 0 ? 0 : std::string::npos) : at + 1;
  unsigned long long kib = 0;
  if (at == std::string::npos || std::sscanf(text.c_str() + at + field.size(), "%llu", &kib) != 1) return std::nullopt;
  return static_cast<std::uint64_t>(kib) << 10;
}

std::optional<std::uint64_t> ResidentBytes(pid_t pid) {
  const std::optional<std::string> status = ReadProcFile("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;  // it ended while the tree was read
  // Neither field: a process that is ending (a zombie holds nothing).
  return KibField(*status, "RssAnon:").value_or(0) + KibField(*status, "RssShmem:").value_or(0);
}

std::optional<std::uint64_t> ProportionalBytes(pid_t pid) {
  if (const std::optional<std::string> rollup = ReadProcFile("/proc/" + std::to_string(pid) + "/smaps_rollup")) {
    const std::optional<std::uint64_t> anon = KibField(*rollup, "Pss_Anon:"), shmem = KibField(*rollup, "Pss_Shmem:");
    if (anon && shmem) return *anon + *shmem;
  }
  return ResidentBytes(pid);
}

// "\040" in a mount point of /proc/PID/mountinfo is a space (and so on for tab, newline, '\').
std::string Unescape(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const auto octal = [&](std::size_t k) { return k < field.size() && field[k] >= '0' && field[k] <= '7'; };
    if (field[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The tmpfs mounts `pid` sees, as (device "major:minor", mount point).
std::vector<std::pair<std::string, std::string>> TmpfsMounts(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> mounts;
  const std::optional<std::string> text =
      ReadProcFile(pid > 0 ? "/proc/" + std::to_string(pid) + "/mountinfo" : "/proc/self/mountinfo");
  if (!text) return mounts;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    // "ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"
    std::istringstream fields(line);
    std::string id, parent, device, root, point, word;
    fields >> id >> parent >> device >> root >> point;
    while (fields >> word && word != "-") {
    }
    std::string type;
    if (fields >> type && type == "tmpfs") mounts.push_back({device, Unescape(point)});
  }
  return mounts;
}

// What a scan of a tree found: its processes, and where the memory its files hold is read (it is
// in no process's counters): each tmpfs its processes see that the runner's own view has not (a
// sandbox's /, /tmp, /dev), and each memfd they hold open.
struct TreeScan {
  std::vector<pid_t> pids;
  std::vector<std::string> tmpfs;   // /proc/PID/root/MOUNT_POINT, one per device
  std::vector<std::string> memfds;  // /proc/PID/fd/N
};

TreeScan ScanTree(pid_t root) {
  TreeScan scan;
  for (const TreeProcess& process : ProcessTree(root)) scan.pids.push_back(process.pid);
  if (scan.pids.empty()) return scan;
  std::set<std::string> devices;
  for (const auto& [device, point] : TmpfsMounts(0)) devices.insert(device);  // the runner's own
  for (pid_t pid : scan.pids) {
    const std::string dir = "/proc/" + std::to_string(pid);
    for (const auto& [device, point] : TmpfsMounts(pid))
      if (devices.insert(device).second) scan.tmpfs.push_back(dir + "/root" + point);
    DIR* fds = opendir((dir + "/fd").c_str());
    if (!fds) continue;
    while (const dirent* entry = readdir(fds)) {
      if (entry->d_name[0] == '.') continue;
      const std::string fd = dir + "/fd/" + entry->d_name;
      char target[64];
      const ssize_t n = readlink(fd.c_str(), target, sizeof target - 1);
      if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)).substr(0, 7) == "/memfd:")
        scan.memfds.push_back(fd);
    }
    closedir(fds);
  }
  return scan;
}

// Bytes the scan's tmpfs mounts and memfds hold now (a memfd counted once however many descriptors
// name it; one closed since the scan, or whose number now names another file, counts nothing).
std::uint64_t FileBytes(const TreeScan& scan) {
  std::uint64_t total = 0;
  for (const std::string& mount : scan.tmpfs) {
    struct statfs fs {};
    if (statfs(mount.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC)
      total += static_cast<std::uint64_t>(fs.f_blocks - fs.f_bfree) * static_cast<std::uint64_t>(fs.f_bsize);
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const std::string& fd : scan.memfds) {
    char target[64];
    const ssize_t n = readlink(fd.c_str(), target, sizeof target - 1);
    struct stat st {};
    if (n <= 0 || std::string_view(target, static_cast<std::size_t>(n)).substr(0, 7) != "/memfd:" ||
        stat(fd.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second)
      continue;
    total += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

// The scan's processes' bytes by `bytes`, plus their files'; nullopt when one of them has ended
// since the scan.
std::optional<std::uint64_t> Reading(const TreeScan& scan, std::optional<std::uint64_t> (*bytes)(pid_t)) {
  std::uint64_t total = FileBytes(scan);
  for (pid_t pid : scan.pids) {
    const std::optional<std::uint64_t> held = bytes(pid);
    if (!held) return std::nullopt;
    total += *held;
  }
  return total;
}

std::optional<std::uint64_t> TreeSum(pid_t root, std::optional<std::uint64_t> (*bytes)(pid_t)) {
  for (int attempt = 0; attempt < 3; ++attempt) {  // a process that ends mid-reading: read again
    const TreeScan scan = ScanTree(root);
    if (scan.pids.empty()) return std::nullopt;
    if (const std::optional<std::uint64_t> total = Reading(scan, bytes)) return total;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> ProcessTreeResidentBytes(pid_t root) { return TreeSum(root, ResidentBytes); }
std::optional<std::uint64_t> ProcessTreeProportionalBytes(pid_t root) { return TreeSum(root, ProportionalBytes); }

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
  using Clock = std::chrono::steady_clock;
  // The tree's pids and files, found by a scan of all of /proc (~1 ms per 100 processes), kept
  // between scans: a reading between them reads only these processes' counters and these files.
  // A process of the tree that ended makes the reading scan again; one that started (or a memfd
  // opened) is found by the next scan (the workers watched here cannot fork once they run a
  // candidate's code: seccomp).
  TreeScan scan;
  Clock::time_point next_scan = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::optional<std::uint64_t> held;
    for (int attempt = 0; attempt < 2 && !held; ++attempt) {
      if (attempt > 0 || Clock::now() >= next_scan) {
        scan = ScanTree(root_);
        next_scan = Clock::now() + kScanEvery;
        if (scan.pids.empty()) return;  // the root is gone
      }
      held = Reading(scan, ResidentBytes);
    }
    if (held && *held > limit_) held = ProcessTreeProportionalBytes(root_);  // shared pages once
    // Read after the tree: if the root was alive then, the pids read above were still its own.
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
  if (bytes >= (std::uint64_t{1} << 30))
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 30) << " GiB";
  else
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 20) << " MiB";
  return out.str();
}

}  // namespace kernelgym
