// The runner pool: which runners are connected, what they serve, which jobs wait and which run
// where. Owned by the server's event loop thread (never touched from another thread); it does no
// I/O itself but hands encoded messages to a send callback, so it is tested without sockets.
//
// Fault handling: a runner that misses heartbeats for `runner_timeout_s` is dropped and its jobs
// go back to the front of their queue. Jobs go only to live runners: heard from within
// LiveWindowSeconds() (three heartbeat intervals), so a re-queued job never goes to a runner that
// is itself falling silent. A job completes as RUNNER_LOST when `max_attempts` runners were lost
// while evaluating it (heard from after it was sent, then silent), or after 4 x max_attempts
// dispatches in all; a runner that froze before it could take the job does not count. A job that
// waits `no_runner_wait_s` with no runner for its backend completes as NO_RUNNER. Both are
// environment errors (status internal_error), never penalized.
//
// Identity: job ids are unique within one server process, and every job carries the process's
// `instance` (random per process). A result is credited only when its instance, job id and task
// digest are those of a job waiting for it; any other is dropped and counted (Stats()'s
// stale_results), so a runner that outlived a server restart cannot answer a new job.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "env/protocol/runner_messages.h"

namespace kernelgym::server {

using Clock = std::chrono::steady_clock;

// Upper bounds (seconds) of the job-latency histogram in Stats() ("job_seconds").
inline constexpr double kJobSecondsBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

struct SchedulerOptions {
  double heartbeat_interval_s = 0.5;  // told to runners in `welcome`
  double runner_timeout_s = 3.0;      // silence after which a runner is considered dead
  int max_attempts = 3;               // the first try and two re-queues
  std::size_t max_queued_jobs = 4096; // per backend; past it, Submit refuses (OVERLOADED)
  double no_runner_wait_s = 60;       // how long a job may wait for a runner of its backend
};

struct JobOutcome {
  uint64_t job_id = 0;
  EvalResult result;
  std::string runner;  // runner id ("" when it never ran)
  int attempts = 0;
};

class Scheduler {
 public:
  // (runner ZeroMQ identity, message bytes)
  using SendFn = std::function<void(const std::string& identity, const std::string& bytes)>;

  // `instance`: this server process's id, stamped on every job (non-empty).
  Scheduler(SchedulerOptions options, std::string instance, SendFn send);

  // Queues a job (its job_id must be unique; its instance is set here). False when the backend's
  // queue is full.
  [[nodiscard]] bool Submit(protocol::runner::Job job, Clock::time_point now);
  // Forgets a job whose answer nobody wants any more (its env was closed). A running job keeps
  // its runner's slot until the runner answers.
  void Cancel(uint64_t job_id);

  // A message from a runner's DEALER. Completed jobs are appended to `done`.
  void OnRunnerMessage(const std::string& identity, std::string_view bytes, Clock::time_point now,
                       std::vector<JobOutcome>& done);
  // Drops silent runners, fails jobs that waited too long. Call at least every heartbeat interval.
  void Tick(Clock::time_point now, std::vector<JobOutcome>& done);

  std::vector<std::string> Backends() const;  // served by at least one connected runner
  // How a connected runner serving `backend` describes it (its runner.hello); nullopt when none does.
  std::optional<BackendInfo> Descriptor(const std::string& backend) const;
  std::size_t queued() const;
  std::size_t running() const;
  std::size_t runner_count() const { return runners_.size(); }
  // A hint for OVERLOADED replies: roughly when a queue slot frees up.
  double RetryAfterSeconds(const std::string& backend) const;
  nlohmann::json Stats(Clock::time_point now) const;
  // The fingerprint a runner announced ({} when unknown, e.g. it left meanwhile).
  nlohmann::json RunnerFingerprint(const std::string& runner_id) const;
  const std::string& instance() const { return instance_; }
  // A runner heard from within this many seconds may be sent a job.
  double LiveWindowSeconds() const;

 private:
  struct Runner {
    std::string identity;
    protocol::runner::RunnerHello hello;
    std::set<uint64_t> jobs;  // running here
    Clock::time_point last_seen;
    uint64_t completed = 0;
  };
  struct JobState {
    protocol::runner::Job job;
    int attempts = 0;              // dispatches so far
    int lost = 0;                  // runners lost while they evaluated it (heard from after dispatch)
    std::string runner_identity;   // where it runs; empty while queued
    Clock::time_point queued_since;
    Clock::time_point submitted_at;
    Clock::time_point dispatched_at;
    bool cancelled = false;
  };

  void Dispatch(Clock::time_point now);
  void DropRunner(const std::string& identity, const std::string& why, Clock::time_point now,
                  std::vector<JobOutcome>& done);
  void Complete(uint64_t job_id, EvalResult result, const std::string& runner_id, std::vector<JobOutcome>& done,
                Clock::time_point now);
  void Send(const std::string& identity, const protocol::runner::ToRunner& message);
  // Whether `done` answers a job waiting for it; when not, why not (counted in stale_results_).
  bool Credible(const protocol::runner::JobDone& done, std::string& why) const;

  SchedulerOptions options_;
  std::string instance_;
  SendFn send_;
  std::map<std::string, Runner> runners_;           // by ZeroMQ identity
  std::map<uint64_t, JobState> jobs_;               // queued or running
  std::map<std::string, std::deque<uint64_t>> queues_;  // by backend
  uint64_t requeued_ = 0, lost_ = 0, dropped_runners_ = 0, completed_ = 0;
  std::map<std::string, uint64_t> stale_results_;        // dropped results, by reason
  std::map<std::string, uint64_t> completed_by_status_;  // jobs answered, by the result's status
  // Seconds from a job's submission to its completion (queue wait included), as a histogram
  // with the upper bounds kJobSecondsBuckets (and +Inf): what the metrics endpoint exports.
  std::vector<uint64_t> job_seconds_counts_;
  double job_seconds_sum_ = 0;
  double mean_job_seconds_ = 1.0;                   // running mean, for retry-after hints
};

}  // namespace kernelgym::server
