#include "core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

namespace kernelgym {
namespace {

void SetLimit(int resource, rlim_t value) {
  struct rlimit rl{value, value};
  setrlimit(resource, &rl);
}

}  // namespace

bool ReadAvailable(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      // Keep the head only: a child that floods its output must not grow the runner's memory.
      constexpr std::size_t kMaxCaptured = std::size_t{1} << 20;
      if (out.size() < kMaxCaptured) out.append(buf, std::min(static_cast<std::size_t>(n), kMaxCaptured - out.size()));
      continue;
    }
    if (n == 0) return false;  // EOF
    return errno == EAGAIN || errno == EINTR;
  }
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
    exited_ = other.exited_;
    exit_code_ = other.exit_code_;
    signal_ = other.signal_;
    stdout_ = std::move(other.stdout_);
    stderr_ = std::move(other.stderr_);
    error_ = std::move(other.error_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { Reset(); }

void ChildProcess::Reset() {
  if (pid_ > 0 && !exited_) {
    Kill();
    int status;
    waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
  pid_ = -1;
  stdout_fd_ = stderr_fd_ = -1;
}

ChildProcess ChildProcess::Spawn(const SpawnOptions& options) {
  ChildProcess child;
  if (options.argv.empty()) {
    child.error_ = "empty command";
    return child;
  }
  // Everything the child needs is prepared before fork: after fork it only calls
  // async-signal-safe functions, so spawning from a threaded server is safe.
  std::vector<char*> argv, envp;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : options.cpus) CPU_SET(c, &cpus);
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
  if (options.capture_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)) {
    child.error_ = std::string("pipe: ") + strerror(errno);
    return child;
  }
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    child.error_ = std::string("pipe: ") + strerror(errno);
    return child;
  }
  int max_target_fd = 2;
  for (const auto& [from, to] : options.pass_fds) max_target_fd = std::max(max_target_fd, to);

  const pid_t pid = fork();
  if (pid < 0) {
    child.error_ = std::string("fork: ") + strerror(errno);
    return child;
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(options.capture_output ? out_pipe[1] : devnull, 1);
    dup2(options.capture_output ? err_pipe[1] : devnull, 2);
    // Move passed fds above every target first so that dup2 never clobbers a source.
    std::vector<int> staged;
    for (const auto& [from, to] : options.pass_fds) staged.push_back(fcntl(from, F_DUPFD, max_target_fd + 1));
    for (std::size_t i = 0; i < staged.size(); ++i) dup2(staged[i], options.pass_fds[i].second);
    for (int fd = 3; fd < 1024; ++fd) {
      bool passed = false;
      for (const auto& [from, to] : options.pass_fds) passed = passed || to == fd;
      if (!passed && fd != exec_pipe[1]) close(fd);
    }
    if (options.limits.cpu_seconds > 0) SetLimit(RLIMIT_CPU, static_cast<rlim_t>(options.limits.cpu_seconds + 0.999));
    if (options.limits.address_space > 0) SetLimit(RLIMIT_AS, options.limits.address_space);
    if (options.limits.file_size > 0) SetLimit(RLIMIT_FSIZE, options.limits.file_size);
    if (options.limits.open_files > 0) SetLimit(RLIMIT_NOFILE, static_cast<rlim_t>(options.limits.open_files));
    if (!options.cpus.empty()) sched_setaffinity(0, sizeof(cpus), &cpus);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) {
      const int err = errno;
      (void)!write(exec_pipe[1], &err, sizeof(err));
      _exit(127);
    }
    execve(argv[0], argv.data(), envp.data());
    const int err = errno;
    (void)!write(exec_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(exec_pipe[1]);
  if (options.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    child.stdout_fd_ = out_pipe[0];
    child.stderr_fd_ = err_pipe[0];
    fcntl(child.stdout_fd_, F_SETFL, O_NONBLOCK);
    fcntl(child.stderr_fd_, F_SETFL, O_NONBLOCK);
  }
  child.pid_ = pid;
  int exec_errno = 0;
  ssize_t n;
  do n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno)); while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n == sizeof(exec_errno)) {
    child.error_ = "cannot execute " + options.argv[0] + ": " + strerror(exec_errno);
    int status;
    waitpid(pid, &status, 0);
    child.exited_ = true;
    child.pid_ = -1;
  }
  return child;
}

void ChildProcess::DrainOutput() {
  if (stdout_fd_ >= 0 && !ReadAvailable(stdout_fd_, stdout_)) {
    close(stdout_fd_);
    stdout_fd_ = -1;
  }
  if (stderr_fd_ >= 0 && !ReadAvailable(stderr_fd_, stderr_)) {
    close(stderr_fd_);
    stderr_fd_ = -1;
  }
}

void ChildProcess::Kill() {
  if (pid_ > 0 && !exited_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
  }
}

bool ChildProcess::Wait(std::chrono::steady_clock::time_point deadline) {
  while (!exited_) {
    int status;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) signal_ = WTERMSIG(status);
      // The group may still hold stragglers (e.g. a compiler's children): reap them too.
      kill(-pid_, SIGKILL);
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    // Sleep on the output pipes so that a chatty child never blocks on a full pipe.
    pollfd fds[2];
    int nfds = 0;
    if (stdout_fd_ >= 0) fds[nfds++] = {stdout_fd_, POLLIN, 0};
    if (stderr_fd_ >= 0) fds[nfds++] = {stderr_fd_, POLLIN, 0};
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int timeout = static_cast<int>(std::clamp<long long>(wait_ms, 0, 2));
    if (nfds > 0) poll(fds, nfds, timeout);
    else usleep(static_cast<useconds_t>(timeout) * 500 + 100);
    DrainOutput();
  }
  DrainOutput();
  return true;
}

ProcessResult RunProcess(const SpawnOptions& options, double wall_limit_seconds) {
  ProcessResult result;
  const auto start = std::chrono::steady_clock::now();
  ChildProcess child = ChildProcess::Spawn(options);
  if (child.pid() <= 0) {
    result.error = child.error();
    return result;
  }
  result.started = true;
  const auto deadline = wall_limit_seconds > 0
                            ? start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                          std::chrono::duration<double>(wall_limit_seconds))
                            : std::chrono::steady_clock::time_point::max();
  if (!child.Wait(deadline)) {
    result.timed_out = true;
    child.Kill();
    child.Wait(std::chrono::steady_clock::time_point::max());
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = child.exit_code();
  result.signal = child.signal();
  result.stdout_text = child.stdout_text();
  result.stderr_text = child.stderr_text();
  return result;
}

std::string ProcessResult::Describe(double wall_limit_seconds) const {
  std::ostringstream out;
  if (!started) return "did not start: " + error;
  if (timed_out) {
    out << "killed at the " << wall_limit_seconds << " s wall-clock limit";
  } else if (signal != 0) {
    out << "killed by " << SignalName(signal);
    if (signal == SIGXCPU) out << " (CPU time limit)";
  } else {
    out << "exit " << exit_code;
  }
  out << " after " << static_cast<int>(wall_seconds * 1000) << " ms";
  return out.str();
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string HeadLines(const std::string& text, int max_lines) {
  std::size_t pos = 0;
  for (int i = 0; i < max_lines && pos != std::string::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  return pos == std::string::npos ? text : text.substr(0, pos);
}

bool OpenChildChannels(ChildChannels& channels, std::string& error) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channels.control) != 0) {
    error = std::string("socketpair: ") + strerror(errno);
    return false;
  }
  if (pipe2(channels.report, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + strerror(errno);
    close(channels.control[0]);
    close(channels.control[1]);
    return false;
  }
  return true;
}

}  // namespace kernelgym
