// The resident-memory accounting and watchdog that bound the pallas judge's and tracer's memory
// (core/resident_limit.h), on real forked processes: a tree's memory counts its descendants',
// files in memory that no process maps count (a memfd, a tmpfs of the tree's own mount namespace),
// pages a forked child shares with its parent count once in proportion (and do not end a tree
// under the limit), a tree that grows past the limit is killed and the watchdog says with how
// much, and a tree under the limit is left alone.
#include "core/resident_limit.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
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

TEST(ResidentMemory, FilesInMemoryThatNoProcessMapsCount) {
  // A memfd written to and not mapped (64 MiB), and a file in a tmpfs of the child's own mount
  // namespace, as a sandbox's /tmp is (192 MiB): in no process's counters, held all the same.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    const std::string block(kMiB, 'x');
    const int memfd = memfd_create("held", 0);
    for (int i = 0; i < 64; ++i)
      if (write(memfd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) _exit(3);
    char said = 'm';  // the memfd only: no mount namespace of its own here
    if (unshare(CLONE_NEWNS) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          mount("tmpfs", "/tmp", "tmpfs", 0, "size=512m") != 0)
        _exit(4);
      const int file = open("/tmp/held", O_WRONLY | O_CREAT | O_TRUNC, 0600);
      for (int i = 0; i < 192; ++i)
        if (write(file, block.data(), block.size()) != static_cast<ssize_t>(block.size())) _exit(5);
      close(file);
      said = 't';
    }
    if (write(ready[1], &said, 1) != 1) _exit(6);
    for (;;) pause();
  }
  close(ready[1]);
  char said = 0;
  ASSERT_EQ(read(ready[0], &said, 1), 1);
  close(ready[0]);
  const std::optional<std::uint64_t> resident = ProcessTreeResidentBytes(child);
  const std::optional<std::uint64_t> proportional = ProcessTreeProportionalBytes(child);
  End(child);
  ASSERT_TRUE(resident.has_value() && proportional.has_value());
  const std::uint64_t files = said == 't' ? 256 * kMiB : 64 * kMiB;
  for (const std::uint64_t held : {*resident, *proportional}) {
    EXPECT_GE(held, files);
    EXPECT_LT(held, files + 128 * kMiB);
  }
  if (said != 't') GTEST_SKIP() << "no mount namespace for the test's tmpfs here: the memfd alone was counted";
}

// As a fork server's job shares what the server imported: 256 MiB written before the fork, only
// read after it. Returns the parent (the test ends it and its child with its group).
pid_t ForkTreeSharing256MiB() {
  return ForkAndWait([] {
    setpgid(0, 0);  // a group of its own: the test ends the child with it
    char* shared = Hold(256 * kMiB);
    if (ForkAndWait([shared] {
          volatile char sum = 0;
          for (std::uint64_t i = 0; i < 256 * kMiB; i += 4096) sum = sum + shared[i];
        }) <= 0)
      _exit(5);
  });
}

TEST(ResidentMemory, PagesAForkedChildSharesWithItsParentCountOnceInProportion) {
  const pid_t parent = ForkTreeSharing256MiB();
  ASSERT_GT(parent, 0);
  const std::optional<std::uint64_t> resident = ProcessTreeResidentBytes(parent);
  const std::optional<std::uint64_t> proportional = ProcessTreeProportionalBytes(parent);
  kill(-parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  ASSERT_TRUE(resident.has_value() && proportional.has_value());
  EXPECT_GE(*resident, 500 * kMiB) << "the cheap reading counts a shared page for each process";
  EXPECT_GE(*proportional, 250 * kMiB);
  EXPECT_LT(*proportional, 400 * kMiB) << "shared pages counted twice";
}

TEST(ResidentLimit, PagesSharedWithinTheTreeDoNotEndIt) {
  // 512 MiB resident in the cheap reading, 256 MiB in proportion: under a 384 MiB limit.
  const pid_t parent = ForkTreeSharing256MiB();
  ASSERT_GT(parent, 0);
  {
    ResidentLimit limit(parent, 384 * kMiB, std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(limit.exceeded());
    EXPECT_GE(limit.peak_bytes(), 250 * kMiB);
    EXPECT_LT(limit.peak_bytes(), 384 * kMiB);
  }
  EXPECT_EQ(waitpid(parent, nullptr, WNOHANG), 0) << "the watched tree was ended";
  kill(-parent, SIGKILL);
  waitpid(parent, nullptr, 0);
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
