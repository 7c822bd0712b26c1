#include "tpu_runner/cpu/harness/counters.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace kernelgym {

Counters::Counters(pid_t pid) {
  struct Spec {
    const char* name;
    uint32_t type;
    uint64_t config;
  };
  const Spec specs[] = {
      {"task_clock_ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
      {"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
      {"context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
      {"cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
      {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
      {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
      {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
      {"branch_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
  };
  for (const Spec& s : specs) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = s.type;
    attr.config = s.config;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.inherit = 1;  // threads the kernel starts (OpenMP) are counted too
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      unavailable_.push_back(std::string(s.name) + " (" + strerror(errno) + ")");
      continue;
    }
    counters_.push_back({s.name, fd});
  }
}

Counters::~Counters() {
  for (const Counter& c : counters_) close(c.fd);
}

void Counters::Enable() {
  for (const Counter& c : counters_) ioctl(c.fd, PERF_EVENT_IOC_ENABLE, 0);
}

void Counters::Disable() {
  for (const Counter& c : counters_) ioctl(c.fd, PERF_EVENT_IOC_DISABLE, 0);
}

std::map<std::string, double> Counters::Read() const {
  std::map<std::string, double> out;
  for (const Counter& c : counters_) {
    uint64_t value = 0;
    if (read(c.fd, &value, sizeof(value)) == sizeof(value)) out[c.name] = static_cast<double>(value);
  }
  return out;
}

}  // namespace kernelgym
