// The CPU-time accounting that the pallas runner's limits rest on (core/process_cpu.h), on real
// processes: a process tree's CPU time counts every thread and every descendant; a process that
// sleeps spends none; a process that is slow only because others hold its CPU is charged for the
// wait by neither limit; a spinner runs past its CPU limit and a sleeper past the wall-clock
// backstop.
#include "core/process_cpu.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace kernelgym::testing {
namespace {

double OwnCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Spins until the calling process has used `seconds` of CPU time (all its threads together).
void SpinUntil(double seconds) {
  volatile unsigned long sink = 0;
  while (OwnCpuSeconds() < seconds)
    for (int i = 0; i < 100000; ++i) sink = sink + 1;
}

// Runs `body` in a forked child that then exits; the parent gets its pid.
template <typename Body>
pid_t Fork(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  return pid;
}

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

int SomeCpuOfOurs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return 0;
}

void End(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

using Clock = std::chrono::steady_clock;

TEST(ProcessCpu, ATreeCountsEveryThreadAndEveryDescendant) {
  // Two threads spin to 0.6 s of the child's CPU time together, its own child (which has a
  // command name that holds ") (", as /proc/PID/stat prints it unquoted) spins to 0.3 s.
  const pid_t child = Fork([] {
    setpgid(0, 0);  // a group of its own, so that the test ends the grandchild with it
    const pid_t grandchild = Fork([] {
      prctl(PR_SET_NAME, "a) b (c", 0, 0, 0);
      SpinUntil(0.3);
      pause();
    });
    std::thread other([] { SpinUntil(0.6); });
    SpinUntil(0.6);
    other.join();
    pause();
    (void)grandchild;
  });
  ASSERT_GT(child, 0);
  double seen = 0;
  for (const auto give_up = Clock::now() + std::chrono::seconds(60); seen < 0.85 && Clock::now() < give_up;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen = ProcessTreeCpuSeconds(child).value_or(0);
  }
  // 0.9 s in all, read in clock ticks. Without the grandchild the tree would read ~0.6 s;
  // without the second thread, ~0.6 s too.
  EXPECT_GE(seen, 0.85);
  EXPECT_LT(seen, 1.5);
  kill(-child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(ProcessTreeCpuSeconds(child).has_value()) << "a process that is gone has no tree";
}

TEST(ProcessCpu, ASleeperSpendsNoCpuAndRunsIntoTheWallClockBackstop) {
  const pid_t sleeper = Fork([] { sleep(60); });
  ASSERT_GT(sleeper, 0);
  CpuLimit limit(sleeper, /*cpu_seconds=*/0.3, /*wall_seconds=*/1.5);
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  while ((passed = limit.Check()) == CpuLimit::Passed::kNone) std::this_thread::sleep_until(limit.NextCheck());
  End(sleeper);
  EXPECT_EQ(passed, CpuLimit::Passed::kWall);
  EXPECT_GE(limit.wall_used(), 1.5);
  EXPECT_LT(limit.cpu_used(), 0.1);
}

TEST(ProcessCpu, ASpinnerRunsPastItsCpuLimit) {
  const pid_t spinner = Fork([] { SpinUntil(1e9); });
  ASSERT_GT(spinner, 0);
  CpuLimit limit(spinner, /*cpu_seconds=*/0.3, /*wall_seconds=*/60);
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  while ((passed = limit.Check()) == CpuLimit::Passed::kNone) std::this_thread::sleep_until(limit.NextCheck());
  End(spinner);
  EXPECT_EQ(passed, CpuLimit::Passed::kCpu);
  EXPECT_GT(limit.cpu_used(), 0.3);
}

TEST(ProcessCpu, WorkSlowedOnlyByABusyCpuIsNotChargedForTheWait) {
  // The worker needs 0.3 s of CPU; three spinners share its one CPU, so it takes about four
  // times as long on the wall clock. A 0.6 s limit on the wall clock would end it; 0.6 s of its
  // CPU time does not, nor does a wall-clock backstop of 0.6 s that leaves out the time it
  // waited for the CPU.
  const int cpu = SomeCpuOfOurs();
  std::vector<pid_t> hogs;
  for (int i = 0; i < 3; ++i) hogs.push_back(Fork([cpu] {
    PinToCpu(cpu);
    SpinUntil(1e9);
  }));
  const pid_t worker = Fork([cpu] {
    PinToCpu(cpu);
    SpinUntil(0.3);
  });
  ASSERT_GT(worker, 0);
  CpuLimit limit(worker, /*cpu_seconds=*/0.6, /*wall_seconds=*/0.6);
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  int status = 0;
  while (waitpid(worker, &status, WNOHANG) == 0) {
    limit.Measure();
    if ((passed = limit.Check()) != CpuLimit::Passed::kNone) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double wall = limit.wall_used();
  for (pid_t hog : hogs) End(hog);
  if (passed != CpuLimit::Passed::kNone) End(worker);
  EXPECT_EQ(passed, CpuLimit::Passed::kNone) << "charged " << limit.cpu_used() << " s of CPU in " << wall << " s";
  EXPECT_GT(wall, 0.6) << "the hogs did not slow the worker: the test shows nothing";
  EXPECT_GT(limit.waited(), 0.3) << "the worker's wait for its CPU is not seen";
  EXPECT_GE(limit.cpu_used(), 0.25);
  EXPECT_LT(limit.cpu_used(), 0.6);
}

TEST(ProcessCpu, AThreadThatOnlyWaitsForACpuEndsAtTheCeiling) {
  // A process at SCHED_IDLE beside six spinners on its one CPU: runnable all the time, it waits
  // for the CPU nearly all the time (it gets ~3% of it). The backstop, which leaves its waiting
  // out, would take ~30 times its limit to end it; the ceiling on plain wall time ends it at 10.
  // The kernel brings a thread's run-queue wait (schedstat) up to date only when the thread next
  // runs, so a thread starved since its start may show no wait yet: then the backstop itself ends
  // it, sooner. Either way it must end, and never after the ceiling.
  const int cpu = SomeCpuOfOurs();
  std::vector<pid_t> hogs;
  for (int i = 0; i < 6; ++i) hogs.push_back(Fork([cpu] {
    PinToCpu(cpu);
    SpinUntil(1e9);
  }));
  const pid_t idler = Fork([cpu] {
    PinToCpu(cpu);
    sched_param param{};
    sched_setscheduler(0, SCHED_IDLE, &param);
    SpinUntil(1e9);
  });
  ASSERT_GT(idler, 0);
  CpuLimit limit(idler, /*cpu_seconds=*/10, /*wall_seconds=*/0.2);
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  while ((passed = limit.Check()) == CpuLimit::Passed::kNone) std::this_thread::sleep_until(limit.NextCheck());
  const double wall = limit.wall_used();
  End(idler);
  for (pid_t hog : hogs) End(hog);
  EXPECT_TRUE(passed == CpuLimit::Passed::kWallCeiling || passed == CpuLimit::Passed::kWall)
      << limit.cpu_used() << " s of CPU, waited " << limit.waited();
  if (passed == CpuLimit::Passed::kWallCeiling) EXPECT_GE(wall, CpuLimit::kCeilingFactor * 0.2);
  EXPECT_LT(wall, CpuLimit::kCeilingFactor * 0.2 + 1.0) << "it ran past the ceiling";
}

}  // namespace
}  // namespace kernelgym::testing
