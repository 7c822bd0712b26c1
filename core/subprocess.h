// Running a helper program (the compiler, the sandbox, the harness) under limits, and saying
// afterwards exactly what ran, under which limit, and what came back.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kernelgym {

struct ResourceLimits {
  double cpu_seconds = 0;           // RLIMIT_CPU (0 = unlimited)
  std::size_t address_space = 0;    // RLIMIT_AS in bytes
  std::size_t file_size = 0;        // RLIMIT_FSIZE in bytes
  int open_files = 0;               // RLIMIT_NOFILE
};

struct SpawnOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;     // the child's whole environment, KEY=VALUE
  std::string working_dir;          // empty: inherit
  ResourceLimits limits;
  std::vector<int> cpus;            // CPU affinity; empty: inherit
  // Parent fds to hand to the child as (parent_fd, child_fd); everything else is closed.
  std::vector<std::pair<int, int>> pass_fds;
  bool capture_output = true;       // stdout/stderr to pipes (else /dev/null)
};

// A started child in its own process group. Owned by one thread.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // On failure returns a child with pid() <= 0 and error() set.
  static ChildProcess Spawn(const SpawnOptions& options);

  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }

  // Reads whatever stdout/stderr has ready into the buffers (non-blocking).
  void DrainOutput();
  // SIGKILL to the whole process group.
  void Kill();
  // Waits for exit; returns false if the deadline passed first (the child is left running).
  bool Wait(std::chrono::steady_clock::time_point deadline);

  bool exited() const { return exited_; }
  int exit_code() const { return exit_code_; }  // -1 when killed by a signal
  int signal() const { return signal_; }
  const std::string& stdout_text() const { return stdout_; }
  const std::string& stderr_text() const { return stderr_; }

 private:
  void Reset();
  pid_t pid_ = -1;
  int stdout_fd_ = -1, stderr_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1, signal_ = 0;
  std::string stdout_, stderr_, error_;
};

struct ProcessResult {
  bool started = false;
  std::string error;        // why it did not start
  int exit_code = -1;       // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;   // the wall-clock deadline was hit and the group was killed
  double wall_seconds = 0;
  std::string stdout_text, stderr_text;

  bool ok() const { return started && !timed_out && exit_code == 0; }
  // "exit 1", "killed by SIGSEGV", "killed at the 10 s wall-clock limit", ...
  std::string Describe(double wall_limit_seconds = 0) const;
};

// The two channels between the runner and a child it drives (the harness, the pallas tracer and judge):
// `control` is a socket pair, so the runner's writes can say MSG_NOSIGNAL (a child that dies before
// reading must not take the runner down with SIGPIPE); `report` is a pipe. [0] is the read end of
// both for the child's side of control and the runner's side of report: the child gets
// control[0] and report[1]. Both close-on-exec; the caller closes what it keeps.
struct ChildChannels {
  int control[2] = {-1, -1};
  int report[2] = {-1, -1};
};
[[nodiscard]] bool OpenChildChannels(ChildChannels& channels, std::string& error);

// Appends what a non-blocking `fd` has ready to `out`, keeping the first MiB only (a child that
// floods its output must not grow our memory); false once `fd` reached its end.
bool ReadAvailable(int fd, std::string& out);

// Runs to completion (or to the wall-clock limit, then kills the process group).
ProcessResult RunProcess(const SpawnOptions& options, double wall_limit_seconds);

// "SIGSEGV" for 11, etc.
std::string SignalName(int signal);
// The first `max_lines` lines of `text`.
std::string HeadLines(const std::string& text, int max_lines);

}  // namespace kernelgym
