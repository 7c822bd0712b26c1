// Closing down the candidate's process (kernelgym-executor): crash reporters, then one seccomp
// allow-list, both before dlopen, so that the candidate's constructors already run under them.
// The filter is installed with TSYNC (the process has no thread but main at that point, and
// every later thread inherits it), and it refuses seccomp(2) and prctl, so it can be neither
// undone nor stacked with a filter of the candidate's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_runner/cpu/harness/doorbell.h"

namespace kernelgym::executor {

// One mapped tensor, for naming a faulting address.
struct MappedBuffer {
  const char* name;       // points into storage that lives as long as the process
  uint64_t lo, hi;        // [lo, hi): the tensor's pages
  uint64_t guard_hi;      // [hi, guard_hi): its guard page
  bool read_only;
};

// Fatal signals, exit() and std::terminate write what happened into `bell`'s violation record
// (a write into an input, past an output, a forbidden system call's name, ...) and end the
// process with a distinct status. The judge reads the record only to word a failure.
void InstallCrashReporters(Doorbell* bell, const std::vector<MappedBuffer>& buffers);
// Writes the violation record once (later calls keep the first). Async-signal-safe.
void RecordViolation(Doorbell* bell, const char* kind, const char* message, long long value);

// The allow-list (everything else traps, reported by name); memory calls on the arena
// [arena_base, arena_base + arena_bytes) trap too.
bool InstallAllowList(uint64_t arena_base, uint64_t arena_bytes, std::string& error);

}  // namespace kernelgym::executor
