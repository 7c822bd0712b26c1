#include "env/server/local_runners.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace kernelgym::server {

LocalRunners::LocalRunners(std::vector<std::string> argv, std::string endpoint, int count)
    : argv_(std::move(argv)), endpoint_(std::move(endpoint)), slots_(static_cast<std::size_t>(std::max(0, count))) {}

LocalRunners::~LocalRunners() { Stop(std::chrono::milliseconds(3000)); }

pid_t LocalRunners::SpawnOne() {
  std::vector<std::string> args = argv_;
  args.push_back("--connect");
  args.push_back(endpoint_);
  std::vector<char*> c_args;
  for (std::string& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // The runner must not outlive the server, whatever kills the server.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(0);
    setpgid(0, 0);  // its own group: a Ctrl-C at the terminal reaches the server, which stops it
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(c_args[0], c_args.data());
    static const char kMessage[] = "kernelgym serve: cannot exec the local runner\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);  // async-signal-safe
    _exit(127);
  }
  if (pid < 0) spdlog::error("fork for a local runner failed: {}", std::strerror(errno));
  return pid;
}

void LocalRunners::Start() {
  const auto now = std::chrono::steady_clock::now();
  for (Slot& slot : slots_) {
    slot.pid = SpawnOne();
    slot.started_at = now;
  }
}

void LocalRunners::Supervise(std::chrono::steady_clock::time_point now) {
  for (Slot& slot : slots_) {
    if (slot.pid > 0) {
      int status = 0;
      if (waitpid(slot.pid, &status, WNOHANG) != slot.pid) continue;
      const std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                  : "exited with " + std::to_string(WEXITSTATUS(status));
      // A runner that dies right after starting is failing, not unlucky: back off.
      const bool quick = now - slot.started_at < std::chrono::seconds(5);
      slot.consecutive_failures = quick ? slot.consecutive_failures + 1 : 0;
      const auto backoff = std::chrono::milliseconds(
          std::min<int64_t>(30000, 100LL << std::min(slot.consecutive_failures, 8)));
      spdlog::warn("local runner pid {} {}; restarting in {} ms", slot.pid, how, backoff.count());
      slot.pid = -1;
      slot.restart_at = now + backoff;
    }
    if (slot.pid <= 0 && !stopping_ && now >= slot.restart_at) {
      slot.pid = SpawnOne();
      slot.started_at = now;
      ++restarts_;
    }
  }
}

void LocalRunners::Stop(std::chrono::milliseconds grace) {
  stopping_ = true;
  for (Slot& slot : slots_)
    if (slot.pid > 0) kill(slot.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (Slot& slot : slots_) {
    while (slot.pid > 0) {
      if (waitpid(slot.pid, nullptr, WNOHANG) == slot.pid) {
        slot.pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(-slot.pid, SIGKILL);  // its group: the runner and anything it started
        kill(slot.pid, SIGKILL);
        waitpid(slot.pid, nullptr, 0);
        slot.pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

std::vector<pid_t> LocalRunners::pids() const {
  std::vector<pid_t> out;
  for (const Slot& slot : slots_)
    if (slot.pid > 0) out.push_back(slot.pid);
  return out;
}

}  // namespace kernelgym::server
