// What the judge's clock costs: one call through the doorbell (harness/side.h) into another
// process that does nothing, on one CPU, against reading the clock twice in-process (what the
// old harness did around each call). The difference is the overhead every timed call of either
// side now carries; it is the same for the reference and the candidate.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <vector>

#include <CLI/CLI.hpp>

#include "tpu_runner/cpu/harness/doorbell.h"
#include "tpu_runner/cpu/harness/side.h"

namespace {

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

void Report(const char* what, std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) { return ns[static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1))] / 1e3; };
  std::printf("%-44s p10 %7.2f  median %7.2f  p90 %7.2f  p99 %7.2f us\n", what, at(0.1), at(0.5), at(0.9), at(0.99));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelgym doorbell benchmark"};
  int calls = 20000, cpu = -1;
  app.add_option("--calls", calls);
  app.add_option("--cpu", cpu, "the CPU both processes run on (default: the last one)");
  CLI11_PARSE(app, argc, argv);
  if (cpu < 0) cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  Pin(cpu);
  using namespace kernelgym;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* bell = new (page) Doorbell();
  const pid_t pid = fork();
  if (pid == 0) {  // a side that does nothing but answer
    bell->ready.store(1);
    FutexWakeAll(&bell->ready);
    uint32_t seen = 0;
    for (;;) {
      seen = AwaitGo(*bell, seen);
      if (bell->op == static_cast<uint32_t>(CallOp::kExit)) _exit(0);
      SignalDone(*bell, seen);
    }
  }
  Side side(pid, bell);
  side.AwaitReady(10e9);
  std::vector<double> in_process, doorbell, cpu_of_side, whole_plain, taken_clock, whole_taken;
  for (int i = 0; i < calls; ++i) {
    const double t0 = MonotonicNs();
    const double t1 = MonotonicNs();
    in_process.push_back(t1 - t0);
    const Side::Call call = side.Ring(CallOp::kRun, 0, 0, 1e9, 10e9);
    whole_plain.push_back(MonotonicNs() - t1);
    doorbell.push_back(call.wall_ns);
    cpu_of_side.push_back(call.cpu_ns);
    // The same call with its outputs taken at `done` (the side stopped, waited for, continued):
    // the clock must not change; the whole call, as the judge's loop sees it, gets longer.
    const double t2 = MonotonicNs();
    const Side::Call taken = side.Ring(CallOp::kRun, 0, 0, 1e9, 10e9, [] {});
    whole_taken.push_back(MonotonicNs() - t2);
    taken_clock.push_back(taken.wall_ns);
  }
  bell->op = static_cast<uint32_t>(CallOp::kExit);
  bell->go.fetch_add(1);
  FutexWakeAll(&bell->go);
  waitpid(pid, nullptr, 0);
  std::printf("%d calls on CPU %d\n", calls, cpu);
  Report("two clock reads in one process (old)", in_process);
  Report("an empty call through the doorbell (new)", doorbell);
  Report("CPU time the side's clock shows for it", cpu_of_side);
  Report("a call with its outputs taken at done: clock", taken_clock);
  Report("the whole Ring() of an empty call", whole_plain);
  Report("the whole Ring() with the outputs taken", whole_taken);
  return 0;
}
