#include "core/process_cpu.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/process_tree.h"

namespace kernelgym {

std::optional<double> ProcessTreeCpuSeconds(pid_t root) {
  const auto tree = ProcessTree(root);
  if (tree.empty()) return std::nullopt;
  unsigned long long total = 0;
  for (const TreeProcess& process : tree) total += process.cpu_ticks;
  static const long kTicksPerSecond = sysconf(_SC_CLK_TCK);
  return static_cast<double>(total) / static_cast<double>(kTicksPerSecond > 0 ? kTicksPerSecond : 100);
}

std::unordered_map<pid_t, double> ProcessTreeRunQueueWaits(pid_t root) {
  std::unordered_map<pid_t, double> waits;
  for (const TreeProcess& process : ProcessTree(root)) {
    const std::string tasks = "/proc/" + std::to_string(process.pid) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (!dir) continue;
    while (const dirent* entry = readdir(dir)) {
      char* end = nullptr;
      const long tid = std::strtol(entry->d_name, &end, 10);
      if (tid <= 0 || *end != '\0') continue;
      // "time on a CPU, time waiting on a run queue (both ns), time slices"
      std::ifstream in(tasks + "/" + entry->d_name + "/schedstat");
      unsigned long long on_cpu = 0, waiting = 0;
      if (in >> on_cpu >> waiting) waits[static_cast<pid_t>(tid)] = 1e-9 * static_cast<double>(waiting);
    }
    closedir(dir);
  }
  return waits;
}

CpuLimit::CpuLimit(pid_t root, double cpu_seconds, double wall_seconds)
    : root_(root), cpu_limit_(cpu_seconds), wall_limit_(wall_seconds), start_(Clock::now()) {
  start_cpu_ = ProcessTreeCpuSeconds(root_).value_or(0);
  start_waits_ = ProcessTreeRunQueueWaits(root_);
  next_check_ = start_ + kCheckEvery;
}

std::optional<double> CpuLimit::Spent() const {
  const std::optional<double> now = ProcessTreeCpuSeconds(root_);
  if (!now) return std::nullopt;
  return *now - start_cpu_;
}

CpuLimit::Passed CpuLimit::Check() {
  const auto now = Clock::now();
  const double wall = std::chrono::duration<double>(now - start_).count();
  // Read when a reading is due, and before the backstop is declared passed: the waiting it
  // leaves out must be as of now.
  if (now >= next_check_ || wall - waited_ >= wall_limit_) {
    next_check_ = now + kCheckEvery;
    if (std::optional<double> spent = Spent()) {
      if (*spent > cpu_limit_) spent = Spent();  // counted twice while a parent reaped a child?
      if (spent) cpu_used_ = std::max(cpu_used_, *spent);
      if (spent && *spent > cpu_limit_) return Passed::kCpu;
    }
    for (const auto& [tid, waiting] : ProcessTreeRunQueueWaits(root_)) {
      const auto before = start_waits_.find(tid);  // a thread started since: all its waiting
      waited_ = std::max(waited_, waiting - (before == start_waits_.end() ? 0 : before->second));
    }
  }
  if (wall >= kCeilingFactor * wall_limit_) return Passed::kWallCeiling;
  return wall - waited_ >= wall_limit_ ? Passed::kWall : Passed::kNone;
}

void CpuLimit::Measure() {
  if (const std::optional<double> spent = Spent()) cpu_used_ = std::max(cpu_used_, *spent);
}

CpuLimit::Clock::time_point CpuLimit::NextCheck() const {
  const auto wall_deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(std::min(wall_limit_ + waited_, kCeilingFactor * wall_limit_)));
  return std::min(next_check_, wall_deadline);
}

double CpuLimit::wall_used() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

}  // namespace kernelgym
