// Runner processes that `kernelgym serve` starts on its own host (`--local-runners N`), so the
// quick start needs nothing else. Each is an ordinary `kernelgym runner` connected to the runner
// endpoint, exactly like a runner on another host; one that dies is restarted (with backoff), and
// it rejoins through the normal runner.hello. They die with the server (PR_SET_PDEATHSIG), even
// when the server is killed with SIGKILL.
// Owned by the server's event loop thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace kernelgym::server {

class LocalRunners {
 public:
  // `argv`: the runner command line without the endpoint (e.g. {"/path/kernelgym", "runner"}).
  LocalRunners(std::vector<std::string> argv, std::string endpoint, int count);
  ~LocalRunners();  // stops them (SIGTERM, then SIGKILL after a grace period)

  void Start();
  // Reaps exited runners and restarts them once their backoff has passed. Call periodically.
  void Supervise(std::chrono::steady_clock::time_point now);
  // SIGTERM to all, then wait up to `grace` and SIGKILL what is left.
  void Stop(std::chrono::milliseconds grace);

  std::vector<pid_t> pids() const;
  int restarts() const { return restarts_; }

 private:
  struct Slot {
    pid_t pid = -1;
    std::chrono::steady_clock::time_point restart_at{};
    int consecutive_failures = 0;
    std::chrono::steady_clock::time_point started_at{};
  };
  pid_t SpawnOne();

  std::vector<std::string> argv_;
  std::string endpoint_;
  std::vector<Slot> slots_;
  int restarts_ = 0;
  bool stopping_ = false;
};

}  // namespace kernelgym::server
