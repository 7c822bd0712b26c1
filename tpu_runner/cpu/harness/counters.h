// Per-call performance counters of the candidate's process (perf_event_open on its pid, opened
// by the judge while the process still has the judge's uid).
// Software counters exist on every Linux; hardware ones only where the machine exposes a PMU
// (these VMs do not), so every counter is optional and its absence is reported, not fatal.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace kernelgym {

class Counters {
 public:
  explicit Counters(pid_t pid);  // opens what it can, disabled
  ~Counters();
  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;

  void Enable();
  void Disable();
  // Totals since opening (only while enabled), by name.
  std::map<std::string, double> Read() const;
  const std::vector<std::string>& unavailable() const { return unavailable_; }

 private:
  struct Counter {
    std::string name;
    int fd;
  };
  std::vector<Counter> counters_;
  std::vector<std::string> unavailable_;
};

}  // namespace kernelgym
