// Facts about this machine: a fingerprint (what measured peaks and compiled objects are valid
// for), the CPU count, and the CPUs reserved for timing.
#pragma once

#include <string>
#include <vector>

namespace kernelgym {

// Stable across reboots, different when the CPU model, its flags or the core count change.
std::string MachineFingerprint();
int OnlineCpus();

// Timing runs on the last `threads` CPUs; compiles and everything else stay off them when the
// machine has CPUs to spare (PLATFORM.md: a same-core busy loop multiplies wall times by 5),
// unless KERNELGYM_SHARE_TIMING_CPUS=1 (a host that times nothing while other work runs).
std::vector<int> TimingCpus(int threads);
std::vector<int> NonTimingCpus(int threads);

// Default cache root: $KERNELGYM_CACHE, else $XDG_CACHE_HOME/kernelgym, else ~/.cache/kernelgym.
std::string DefaultCacheDir();

}  // namespace kernelgym
