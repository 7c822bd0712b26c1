// Confining the harness process before and after the candidate is loaded. The order matters and
// is the caller's: handlers -> limits -> uid drop -> seccomp stage 1 -> dlopen -> seccomp stage 2.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tpu_runner/harness/arena.h"

namespace kernelgym::confine {

// Fatal signals (SEGV, BUS, FPE, ILL, ABRT, SYS) and exit()/terminate() report what happened
// (a write into an input, past an output, a forbidden syscall's name, ...) and end the process.
// `arena` is consulted to name the buffer a faulting address belongs to.
void InstallCrashReporters(const Arena* arena);

// Lowers resource limits that only make sense once the reference is loaded.
void TightenLimits(int threads);

// Drops to `uid`/`gid` (when root and allowed); returns false when it could not.
bool DropPrivileges(uint32_t uid);

// Stage 1, before dlopen: no network, no processes (threads only), no exec, no ptrace, no
// remapping the arena, no forged report frames, no signal handlers, no CPU affinity changes.
bool InstallStage1(const Arena& arena, int report_fd, uint64_t cookie, std::string& error);
// Stage 2, after dlopen: additionally no opening files and no new executable memory.
bool InstallStage2(std::string& error);

// Which protections are active, for the result record.
std::map<std::string, bool>& Protections();

}  // namespace kernelgym::confine
