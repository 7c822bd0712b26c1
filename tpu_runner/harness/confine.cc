#include "tpu_runner/harness/confine.h"

#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <sched.h>

#include "tpu_runner/harness/report.h"

namespace kernelgym::confine {
namespace {

const Arena* g_arena = nullptr;

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
    report::SendViolation("seccomp", name ? name : "unknown", info->si_syscall);
    _exit(101);
  }
  if ((sig == SIGSEGV || sig == SIGBUS) && g_arena) {
    bool in_guard = false;
    const ArenaBuffer* buffer = g_arena->Find(info->si_addr, &in_guard);
    if (buffer && in_guard) {
      report::SendViolation("out_of_bounds", buffer->name.c_str(), reinterpret_cast<long long>(info->si_addr));
      _exit(102);
    }
    if (buffer && buffer->read_only) {
      report::SendViolation("input_write", buffer->name.c_str(), reinterpret_cast<long long>(info->si_addr));
      _exit(103);
    }
  }
  report::SendViolation("signal", SignalLabel(sig), reinterpret_cast<long long>(info->si_addr));
  _exit(104);
}

void OnExit() { report::SendViolation("exit", "exit() was called while the kernel ran", 0); }

void OnTerminate() {
  const char* type = "unknown";
  if (std::type_info* t = abi::__cxa_current_exception_type()) type = t->name();
  report::SendViolation("terminate", type, 0);
  _exit(105);
}

int SysNum(const char* name) { return seccomp_syscall_resolve_name(name); }

}  // namespace

std::map<std::string, bool>& Protections() {
  static std::map<std::string, bool> protections;
  return protections;
}

void InstallCrashReporters(const Arena* arena) {
  g_arena = arena;
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

void TightenLimits(int threads) {
  struct rlimit none{0, 0};
  setrlimit(RLIMIT_CORE, &none);
  setrlimit(RLIMIT_FSIZE, &none);
  struct rlimit files{64, 64};
  setrlimit(RLIMIT_NOFILE, &files);
  // Threads count against RLIMIT_NPROC per uid: room for the OpenMP pool, no thread bombs.
  const rlim_t tasks = static_cast<rlim_t>(threads) * 2 + 16;
  struct rlimit nproc{tasks, tasks};
  Protections()["rlimits"] = setrlimit(RLIMIT_NPROC, &nproc) == 0;
}

bool DropPrivileges(uint32_t uid) {
  if (uid == 0 || geteuid() != 0) return geteuid() != 0;  // already unprivileged, or told not to
  const bool ok = setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0;
  return ok && geteuid() == uid;
}

bool InstallStage1(const Arena& arena, int report_fd, uint64_t cookie, std::string& error) {
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) {
    error = "seccomp_init failed";
    return false;
  }
  int rc = 0;
  auto deny = [&](const char* name) {
    const int nr = SysNum(name);
    if (nr != __NR_SCMP_ERROR && rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 0);
  };
  for (const char* name :
       {"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "sendmmsg",
        "recvfrom", "recvmsg", "recvmmsg", "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv",
        "process_vm_writev", "kexec_load", "kexec_file_load", "mount", "umount2", "pivot_root", "chroot", "unshare",
        "setns", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "personality", "setuid",
        "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "reboot", "swapon", "swapoff",
        "kill", "tkill", "rt_sigaction", "sigaltstack", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
        "setpriority", "setrlimit", "writev", "pwrite64", "pwritev", "pwritev2", "sendfile", "splice",
        "tee", "vmsplice", "copy_file_range", "dup", "dup2", "dup3", "mbind", "migrate_pages", "move_pages",
        "open_by_handle_at", "name_to_handle_at", "pidfd_open", "pidfd_getfd", "pidfd_send_signal"})
    deny(name);
  // Threads yes, processes no: clone must carry CLONE_THREAD; clone3 reports ENOSYS so glibc
  // falls back to clone, where the flag is visible to the filter.
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  // Signals only to ourselves (abort() uses tgkill).
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_NE, static_cast<uint64_t>(getpid())));
  // prlimit64 with a new limit raises or lowers limits; without one it is getrlimit().
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(prlimit64), 1, SCMP_A2(SCMP_CMP_NE, 0));
  // fcntl(F_DUPFD*) would copy the report fd to a number the cookie rule does not cover.
  for (int cmd : {F_DUPFD, F_DUPFD_CLOEXEC})
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, static_cast<uint64_t>(cmd)));
  // The arena's mappings are fixed: no unprotecting inputs, unmapping guards or remapping.
  for (const char* name : {"mprotect", "pkey_mprotect", "munmap", "mremap", "madvise", "mmap", "remap_file_pages"}) {
    const int nr = SysNum(name);
    if (nr != __NR_SCMP_ERROR && rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, Arena::kMask, arena.base()));
  }
  // Frames on the report fd need the cookie.
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(write), 2, SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(report_fd)),
                          SCMP_A3(SCMP_CMP_NE, cookie));
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    error = std::string("seccomp stage 1: ") + strerror(-rc);
    return false;
  }
  return true;
}

bool InstallStage2(std::string& error) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  int rc = ctx ? 0 : -ENOMEM;
  for (const char* name : {"open", "openat", "openat2", "creat", "memfd_create", "symlink", "link", "rename",
                           "unlink", "mkdir", "chmod", "truncate"}) {
    const int nr = SysNum(name);
    if (nr != __NR_SCMP_ERROR && rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 0);
  }
  for (const char* name : {"mmap", "mprotect", "pkey_mprotect"}) {
    const int nr = SysNum(name);
    if (nr != __NR_SCMP_ERROR && rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
  }
  if (rc == 0) rc = seccomp_load(ctx);
  if (ctx) seccomp_release(ctx);
  if (rc != 0) {
    error = std::string("seccomp stage 2: ") + strerror(-rc);
    return false;
  }
  return true;
}

}  // namespace kernelgym::confine
