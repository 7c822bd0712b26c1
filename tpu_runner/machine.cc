#include "tpu_runner/machine.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/digest.h"

namespace kernelgym {

std::string MachineFingerprint() {
  static const std::string fingerprint = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(cpuinfo, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 1);
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1);
    }
    return Sha256Hex({model, flags, std::to_string(OnlineCpus())}).substr(0, 16);
  }();
  return fingerprint;
}

int OnlineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

namespace {
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}
}  // namespace

std::vector<int> TimingCpus(int threads) {
  std::vector<int> cpus = AllowedCpus();
  const std::size_t n = std::min<std::size_t>(std::max(threads, 1), cpus.size());
  return std::vector<int>(cpus.end() - static_cast<long>(n), cpus.end());
}

// KERNELGYM_SHARE_TIMING_CPUS=1: untimed work may use the timing CPUs too. For a host where
// nothing is timed while other work runs, such as the test suite outside its serial timing
// comparisons (tests/integration/CMakeLists.txt): with two CPUs, keeping one for timing left
// every compile and correctness check of two parallel tests on the other.
bool ShareTimingCpus() {
  const char* share = std::getenv("KERNELGYM_SHARE_TIMING_CPUS");
  return share && std::string(share) == "1";
}

std::vector<int> NonTimingCpus(int threads) {
  std::vector<int> cpus = AllowedCpus();
  if (ShareTimingCpus()) return cpus;
  const std::size_t n = std::min<std::size_t>(std::max(threads, 1), cpus.size());
  if (n >= cpus.size()) return cpus;  // nothing to spare: share
  return std::vector<int>(cpus.begin(), cpus.end() - static_cast<long>(n));
}

std::string DefaultCacheDir() {
  if (const char* env = std::getenv("KERNELGYM_CACHE")) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/kernelgym";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/kernelgym";
  return "/tmp/kernelgym-cache";
}

}  // namespace kernelgym
