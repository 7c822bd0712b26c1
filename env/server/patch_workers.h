// `patch` actions, applied off the event loop. GNU patch runs as a child process (about 10 ms
// each); on the loop, one client keeping patch steps in flight would stall every other client's
// requests behind them. The loop hands each diff here with a token, keeps the env busy, and picks
// the outcome up when notify_fd() is readable.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/episode/source_edits.h"

namespace kernelgym::server {

class PatchWorkers {
 public:
  struct Done {
    uint64_t token = 0;
    EditOutcome outcome;
  };

  explicit PatchWorkers(int threads = 2);
  ~PatchWorkers();  // lets the running patches finish (a few ms each), drops the queued ones
  PatchWorkers(const PatchWorkers&) = delete;
  PatchWorkers& operator=(const PatchWorkers&) = delete;

  void Submit(uint64_t token, std::string source, std::string diff);
  // The outcomes that are ready, in completion order; clears the notification.
  std::vector<Done> TakeDone();
  // Readable while outcomes are ready (an eventfd): for the loop's poll.
  int notify_fd() const { return notify_fd_; }

 private:
  struct Job {
    uint64_t token;
    std::string source, diff;
  };
  void Work();

  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Job> jobs_;    // guarded by mutex_
  std::vector<Done> done_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  int notify_fd_ = -1;
  std::vector<std::thread> threads_;
};

}  // namespace kernelgym::server
