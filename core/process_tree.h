// A process and everything under it, as /proc shows them now: what the runner's limits on a
// helper's process tree (CPU time, resident memory) read.
#pragma once

#include <sys/types.h>

#include <vector>

namespace kernelgym {

struct TreeProcess {
  pid_t pid = 0;
  // CPU ticks (utime + stime + cutime + cstime): its threads, and the children it reaped.
  unsigned long long cpu_ticks = 0;
};

// `root` first, then every process under it; empty when `root` is gone. A snapshot: a process
// may start or end while /proc is read.
std::vector<TreeProcess> ProcessTree(pid_t root);

}  // namespace kernelgym
