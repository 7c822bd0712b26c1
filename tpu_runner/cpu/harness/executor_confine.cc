#include "tpu_runner/cpu/harness/executor_confine.h"

#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <sched.h>

namespace kernelgym::executor {
namespace {

Doorbell* g_bell = nullptr;
constexpr int kMaxBuffers = 64;
MappedBuffer g_buffers[kMaxBuffers];
int g_num_buffers = 0;

void Record(const char* kind, const char* message, long long value) { RecordViolation(g_bell, kind, message, value); }

const char* SignalLabel(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGSYS: return "SIGSYS";
    default: return "signal";
  }
}

void OnFatalSignal(int sig, siginfo_t* info, void*) {
  if (sig == SIGSYS && info->si_code == 1 /* SYS_SECCOMP */) {
    const char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, info->si_syscall);
    Record("seccomp", name ? name : "unknown", info->si_syscall);
    _exit(101);
  }
  const uint64_t a = reinterpret_cast<uint64_t>(info->si_addr);
  if (sig == SIGSEGV || sig == SIGBUS) {
    for (int i = 0; i < g_num_buffers; ++i) {
      const MappedBuffer& b = g_buffers[i];
      if (a >= b.hi && a < b.guard_hi) {
        Record("out_of_bounds", b.name, static_cast<long long>(a));
        _exit(102);
      }
      if (a >= b.lo && a < b.hi && b.read_only) {
        Record("input_write", b.name, static_cast<long long>(a));
        _exit(103);
      }
    }
  }
  Record("signal", SignalLabel(sig), static_cast<long long>(a));
  _exit(104);
}

void OnExit() { Record("exit", "exit() was called while the kernel ran", 0); }

void OnTerminate() {
  const char* type = "unknown";
  if (std::type_info* t = abi::__cxa_current_exception_type()) type = t->name();
  Record("terminate", type, 0);
  _exit(105);
}

int Nr(const char* name) { return seccomp_syscall_resolve_name(name); }

// Loads `ctx` for every thread of the process (TSYNC) and releases it.
bool Load(scmp_filter_ctx ctx, int rc, const char* what, std::string& error) {
  if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    error = std::string(what) + ": " + std::strerror(-rc);
    return false;
  }
  return true;
}

}  // namespace

void RecordViolation(Doorbell* bell, const char* kind, const char* message, long long value) {
  if (!bell || bell->violation_written.load(std::memory_order_relaxed)) return;
  std::strncpy(bell->violation_kind, kind, sizeof(bell->violation_kind) - 1);
  std::strncpy(bell->violation_message, message, sizeof(bell->violation_message) - 1);
  bell->violation_value = value;
  bell->violation_written.store(1, std::memory_order_release);
}

void InstallCrashReporters(Doorbell* bell, const std::vector<MappedBuffer>& buffers) {
  g_bell = bell;
  g_num_buffers = 0;
  for (const MappedBuffer& b : buffers)
    if (g_num_buffers < kMaxBuffers) g_buffers[g_num_buffers++] = b;
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = OnFatalSignal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS}) sigaction(sig, &sa, nullptr);
  std::atexit(OnExit);
  std::set_terminate(OnTerminate);
}

bool InstallAllowList(uint64_t arena_base, uint64_t arena_bytes, std::string& error) {
  // What a compute kernel, the C/C++ runtime, libgomp and the dynamic loader need; everything
  // else traps (the handler names the call). Notably absent: seccomp and prctl (no filter of the
  // candidate's own, no undoing ours), every scheduler, priority and affinity setter, signals to
  // other processes, signal handlers, sockets, exec, processes, ptrace, io_uring, perf, and
  // files opened for writing.
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (!ctx) {
    error = "seccomp_init failed";
    return false;
  }
  int rc = 0;
  auto allow = [&](const char* name) {
    const int nr = Nr(name);
    if (nr != __NR_SCMP_ERROR && rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  };
  for (const char* name :
       {"read", "pread64", "readv", "close", "fstat", "newfstatat", "statx", "lseek", "brk", "rt_sigprocmask",
        "rt_sigreturn", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
        "sched_get_priority_max", "sched_get_priority_min", "getpid", "gettid", "getuid", "geteuid", "getgid",
        "getegid", "getcpu", "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
        "futex", "set_robust_list", "get_robust_list", "rseq", "exit", "exit_group", "getrandom", "uname", "sysinfo",
        "getrusage", "times", "restart_syscall", "set_tid_address", "membarrier", "access", "faccessat",
        "readlink", "readlinkat", "getcwd"})
    allow(name);
  // Memory calls anywhere but on the arena, whose mappings are fixed: no unprotecting inputs,
  // unmapping guard pages or remapping tensors. A call's whole range must miss the arena, not
  // just its start: a filter cannot add, so a range below the arena must start at least kReach
  // below it and be at most kReach long (more than the process's address-space limit, so no
  // honest call is refused); a range at or above the arena's end cannot reach down into it.
  constexpr uint64_t kReach = uint64_t{1} << 36;  // 64 GiB
  const uint64_t arena_end = arena_base + arena_bytes;
  const bool room_below = arena_base > kReach;
  for (const char* name : {"munmap", "mprotect", "madvise"}) {
    const int nr = Nr(name);
    if (nr == __NR_SCMP_ERROR || rc != 0) continue;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_GE, arena_end));
    if (rc == 0 && room_below)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 2, SCMP_A0(SCMP_CMP_LT, arena_base - kReach),
                            SCMP_A1(SCMP_CMP_LE, kReach));
  }
  // mmap without MAP_FIXED or MAP_FIXED_NOREPLACE takes its address as a hint the kernel never
  // honours over an existing mapping (and the arena is mapped end to end); a fixed mmap is held
  // to the range rule above.
  if (const int nr = Nr("mmap"); nr != __NR_SCMP_ERROR && rc == 0) {
    const uint64_t fixed = MAP_FIXED | MAP_FIXED_NOREPLACE;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A3(SCMP_CMP_MASKED_EQ, fixed, 0));
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_GE, arena_end));
    if (rc == 0 && room_below)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 2, SCMP_A0(SCMP_CMP_LT, arena_base - kReach),
                            SCMP_A1(SCMP_CMP_LE, kReach));
  }
  // mremap moves or grows a mapping: never to a fixed address (its fifth argument, which the
  // old rule did not see), and its old range held to the range rule; a grown mapping is placed
  // by the kernel in free space, which the arena is not.
  if (const int nr = Nr("mremap"); nr != __NR_SCMP_ERROR && rc == 0) {
    const uint64_t fixed = MREMAP_FIXED;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 2, SCMP_A0(SCMP_CMP_GE, arena_end),
                          SCMP_A3(SCMP_CMP_MASKED_EQ, fixed, 0));
    if (rc == 0 && room_below)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 3, SCMP_A0(SCMP_CMP_LT, arena_base - kReach),
                            SCMP_A1(SCMP_CMP_LE, kReach), SCMP_A3(SCMP_CMP_MASKED_EQ, fixed, 0));
  }
  // Output only to the runner's pipes (stdout, stderr).
  for (uint64_t fd : {1, 2})
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(write), 1, SCMP_A0(SCMP_CMP_EQ, fd));
  // Files for reading only. The process's file view holds nothing but the runtime libraries a
  // kernel may link and the kernel itself (harness_main.cc), so there is nothing else to load.
  const uint64_t write_flags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, write_flags, 0));
  // Threads yes, processes no: clone must carry CLONE_THREAD; clone3 says ENOSYS so glibc falls
  // back to clone, whose flags the filter can see.
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, static_cast<uint64_t>(CLONE_THREAD), CLONE_THREAD));
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  // Signals to itself only (abort() raises SIGABRT with tgkill).
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(getpid())));
  // prlimit64 without a new limit is getrlimit().
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, SCMP_A2(SCMP_CMP_EQ, 0));
  for (uint64_t cmd : {F_GETFD, F_SETFD, F_GETFL})
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, cmd));
  return Load(ctx, rc, "seccomp allow-list", error);
}

}  // namespace kernelgym::executor
