// The resident-memory accounting and watchdog that bound the pallas judge's and tracer's memory
// (core/resident_limit.h), on real forked processes: a tree's memory counts its descendants',
// pages a forked child shares with its parent count once, a tree that grows past the limit is
// killed and the watchdog says with how much, and a tree under the limit is left alone.
#include "core/resident_limit.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace kernelgym::testing {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// `bytes` of fresh anonymous memory, every page written (resident, not merely reserved).
char* Hold(std::uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) _exit(3);
  std::memset(p, 1, bytes);
  return static_cast<char*>(p);
}

// Runs `body` in a forked child, which then waits to be killed; the parent gets its pid once the
// child has said (through a pipe) that `body` is done.
template <typename Body>
pid_t ForkAndWait(Body body) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    body();
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(ready[1]);
  char byte = 0;
  const bool said = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  return said ? pid : -1;
}

void End(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ResidentMemory, ATreeCountsItsDescendants) {
  // The child holds 64 MiB, its own child 192 MiB more.
  const pid_t child = ForkAndWait([] {
    setpgid(0, 0);  // a group of its own: the test ends the grandchild with it
    Hold(64 * kMiB);
    if (ForkAndWait([] { Hold(192 * kMiB); }) <= 0) _exit(5);
  });
  ASSERT_GT(child, 0);
  const std::optional<std::uint64_t> held = ProcessTreeResidentBytes(child);
  kill(-child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(held.has_value());
  EXPECT_GE(*held, 256 * kMiB);
  EXPECT_LT(*held, 400 * kMiB);
  EXPECT_FALSE(ProcessTreeResidentBytes(child).has_value()) << "a tree that is gone holds nothing";
}

TEST(ResidentMemory, PagesAForkedChildSharesWithItsParentCountOnce) {
  // As a fork server's job shares what the server imported: 256 MiB written before the fork,
  // only read after it. Resident sets would count them twice (512 MiB); proportional sets once.
  const pid_t parent = ForkAndWait([] {
    setpgid(0, 0);
    char* shared = Hold(256 * kMiB);
    if (ForkAndWait([shared] {
          volatile char sum = 0;
          for (std::uint64_t i = 0; i < 256 * kMiB; i += 4096) sum = sum + shared[i];
        }) <= 0)
      _exit(5);
  });
  ASSERT_GT(parent, 0);
  const std::optional<std::uint64_t> held = ProcessTreeResidentBytes(parent);
  kill(-parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  ASSERT_TRUE(held.has_value());
  EXPECT_GE(*held, 250 * kMiB);
  EXPECT_LT(*held, 400 * kMiB) << "shared pages counted twice";
}

TEST(ResidentLimit, ATreeThatGrowsPastTheLimitIsKilled) {
  // A child that keeps taking 32 MiB at a time (up to 2 GiB), under a limit of 256 MiB.
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t grower = fork();
  if (grower == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(4);
    for (int i = 0; i < 64; ++i) {
      Hold(32 * kMiB);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    _exit(0);
  }
  close(go[0]);
  ResidentLimit limit(grower, 256 * kMiB);
  const char byte = 1;
  ASSERT_EQ(write(go[1], &byte, 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(grower, &status, 0), grower);
  ASSERT_TRUE(WIFSIGNALED(status)) << "it ran to its end: nothing stopped it at 2 GiB";
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(limit.exceeded());
  EXPECT_GT(limit.held_bytes(), 256 * kMiB);
  // Read every 0.1 s while it takes 32 MiB per ~15 ms: it is caught well before 2 GiB.
  EXPECT_LT(limit.held_bytes(), 1024 * kMiB);
  EXPECT_EQ(limit.peak_bytes(), limit.held_bytes());
  EXPECT_EQ(MemoryAmount(limit.limit_bytes()), "256 MiB");
}

TEST(ResidentLimit, ATreeUnderTheLimitIsLeftAlone) {
  const pid_t child = ForkAndWait([] { Hold(64 * kMiB); });
  ASSERT_GT(child, 0);
  {
    ResidentLimit limit(child, 256 * kMiB, std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(limit.exceeded());
    EXPECT_GE(limit.peak_bytes(), 64 * kMiB);
    EXPECT_LT(limit.peak_bytes(), 256 * kMiB);
  }
  EXPECT_EQ(waitpid(child, nullptr, WNOHANG), 0) << "the watched process was ended";
  End(child);
}

}  // namespace
}  // namespace kernelgym::testing
