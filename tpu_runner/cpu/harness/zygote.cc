#include "tpu_runner/cpu/harness/zygote.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace kernelgym {
namespace {

struct Request {
  int link = -1, control = -1, report = -1, out = -1, err = -1;
  std::vector<int> cpus;
  void Close() const {
    for (int fd : {link, control, report, out, err})
      if (fd >= 0) close(fd);
  }
};

struct Programs {
  std::string harness, reference, executor;
};

int ThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

// 0: a request; 1: not a well-formed one (ignored); -1: the runner closed its end.
int Receive(Request& r) {
  char payload[4096];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kZygoteFdsPerRequest)];
  iovec iov{payload, sizeof(payload) - 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do n = recvmsg(kZygoteRequestFd, &msg, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  if (fds.size() != kZygoteFdsPerRequest || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    for (int fd : fds) close(fd);
    return 1;
  }
  r = Request{fds[0], fds[1], fds[2], fds[3], fds[4], {}};
  try {
    payload[n] = '\0';
    r.cpus = nlohmann::json::parse(payload).at("cpus").get<std::vector<int>>();
  } catch (const std::exception&) {
    r.Close();
    return 1;
  }
  return 0;
}

// dup2 of several descriptors at once: each source first moves above every target, so that no
// source is overwritten before it is copied; then everything else (from `keep_below`) closes.
void Arrange(const std::vector<std::pair<int, int>>& moves, int keep_below) {
  std::vector<std::pair<int, int>> high;
  for (const auto& [from, to] : moves) {
    const int h = fcntl(from, F_DUPFD, 200);
    if (h < 0) _exit(122);
    high.push_back({h, to});
  }
  for (const auto& [from, to] : high)
    if (dup2(from, to) < 0) _exit(122);
  syscall(SYS_close_range, keep_below, ~0U, 0);
}

// In the judge-to-be (a child of the keeper): fork the reference, then become kernelgym-harness.
[[noreturn]] void BecomeJudge(const Request& r, const Programs& programs, int memfd, const int job[2], const int status[2]) {
  if (!r.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : r.cpus) CPU_SET(c, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  const pid_t judge = getpid();
  const pid_t reference = fork();
  if (reference < 0) _exit(121);
  if (reference == 0) {
    // The reference: the judge's child, on 3 (memfd), 4 (job), 5 (status), the runner's stdout
    // and stderr, nothing else of the request (it never holds the runner's channels).
    Arrange({{memfd, 3}, {job[0], 4}, {status[1], 5}, {r.out, 1}, {r.err, 2}}, 6);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != judge) _exit(0);
    signal(SIGPIPE, SIG_DFL);
    RunReference();
  }
  // The judge: control 3, report 4, the reference's memfd 5, job 6 (write end), status 7 (read
  // end). exec replaces everything of the zygote's; the judge's keys are drawn after it.
  Arrange({{r.control, 3}, {r.report, 4}, {memfd, 5}, {job[1], 6}, {status[0], 7}, {r.out, 1}, {r.err, 2}}, 8);
  const std::string pid = std::to_string(reference);
  const char* argv[] = {programs.harness.c_str(), "--control-fd", "3", "--report-fd", "4", "--reference",
                        programs.reference.c_str(), "--executor", programs.executor.c_str(), "--forked-reference", pid.c_str(),
                        nullptr};
  signal(SIGPIPE, SIG_DFL);
  execve(programs.harness.c_str(), const_cast<char* const*>(argv), environ);
  _exit(127);
}

// The keeper of one evaluation: the judge's parent, which tells the runner how the judge ended
// and kills it when the runner asks (its watchdog) or goes away.
[[noreturn]] void Keep(const Request& r, const Programs& programs) {
  close(kZygoteRequestFd);
  const int memfd = memfd_create("kernelgym-reference", MFD_CLOEXEC);
  int job[2], status[2];
  if (memfd < 0 || pipe2(job, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0) _exit(120);
  const pid_t judge = fork();
  if (judge < 0) _exit(121);
  if (judge == 0) BecomeJudge(r, programs, memfd, job, status);
  for (int fd : {memfd, job[0], job[1], status[0], status[1], r.control, r.report, r.out, r.err}) close(fd);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, judge, 0));
  for (;;) {
    pollfd fds[2] = {{r.link, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int n = poll(fds, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 10);
    if (n < 0 && errno != EINTR) break;
    siginfo_t info{};
    if (pidfd >= 0 ? fds[1].revents != 0 : (waitid(P_PID, judge, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == judge))
      break;
    if (fds[0].revents != 0) {
      char c = 0;
      const ssize_t got = read(r.link, &c, 1);
      if (got <= 0 || c == 'k') {
        kill(judge, SIGKILL);
        break;
      }
    }
  }
  int wait_status = 0;
  while (waitpid(judge, &wait_status, 0) < 0 && errno == EINTR) {}
  send(r.link, &wait_status, sizeof(wait_status), MSG_NOSIGNAL);
  _exit(0);
}

}  // namespace

int RunZygote(int argc, char** argv) {
  Programs programs;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--harness") == 0) programs.harness = argv[i + 1];
    if (std::strcmp(argv[i], "--reference") == 0) programs.reference = argv[i + 1];
    if (std::strcmp(argv[i], "--executor") == 0) programs.executor = argv[i + 1];
  }
  if (programs.harness.empty() || programs.reference.empty() || programs.executor.empty()) {
    std::fprintf(stderr, "usage: kernelgym-reference --zygote --harness PATH --reference PATH --executor PATH\n");
    return 2;
  }
  // fork() copies only the calling thread: the references forked from here run libtorch code,
  // which is safe only if no other thread could have held a lock at the fork. Loading libtorch
  // starts none (no operator has run here); should a version ever do, refuse to be a zygote
  // (the runner then spawns references as before). Inside the sandbox /proc is not mounted and
  // this cannot be seen (-1): warm_reference_test checks it from outside.
  if (const int threads = ThreadCount(); threads > 1) {
    std::fprintf(stderr, "kernelgym-reference --zygote: %d threads after loading libtorch; forking would be unsafe\n", threads);
    return 3;
  }
  signal(SIGPIPE, SIG_IGN);  // a request whose runner went away must not end the zygote
  // Ready: the runner waits for this byte before its first request.
  if (write(STDOUT_FILENO, "z", 1) != 1) return 4;
  for (;;) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {}  // keepers that are done
    pollfd p{kZygoteRequestFd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    Request r;
    const int got = Receive(r);
    if (got < 0) return 0;  // the runner closed its end
    if (got > 0) continue;
    const pid_t keeper = fork();
    if (keeper == 0) Keep(r, programs);
    if (keeper < 0) {
      const int st = 0x7f00;  // as if exited 127: the runner reports that the harness did not start
      send(r.link, &st, sizeof(st), MSG_NOSIGNAL);
    }
    r.Close();
    // The runner waits for this before it counts the request as taken (a zygote killed before
    // it comes is started again, and the request sent again).
    send(kZygoteRequestFd, "f", 1, MSG_NOSIGNAL);
  }
}

}  // namespace kernelgym
