// The runner protocol: what `kernelgym serve` and its runners (`kernelgym runner`, local or on
// other hosts) say to each other, as plain C++ types. The server binds a ROUTER for runners; each
// runner connects one DEALER. docs/protocol.md ("Runner protocol") is the contract.
//
//   runner -> server: runner.hello (once per connection, and again when asked), heartbeat, result
//   server -> runner: welcome (answers hello), job, ack (answers heartbeat), reregister (the server
//                     does not know this runner, e.g. after a server restart: send hello again)
//
// A runner evaluates one job at a time per slot. Heartbeats flow while a job runs, so a runner
// that stops heartbeating is dead (or cut off) and its jobs are re-queued by the server.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/backend_info.h"
#include "core/result.h"

namespace kernelgym::protocol::runner {

// 2: a job and its result name the server instance, and a result echoes its job's task digest.
inline constexpr int kRunnerProtocolVersion = 2;

// ---- runner -> server ----
struct RunnerHello {
  int v = kRunnerProtocolVersion;
  std::string runner_id;                          // unique per runner process (host:pid:random)
  std::vector<std::string> backends;              // backends this runner evaluates
  std::vector<BackendInfo> backend_info;          // the descriptor of each of `backends`, in that order
  std::map<std::string, std::string> fingerprint; // host, cpu model, cores, compiler, kernel, peaks...
  int slots = 1;                                  // jobs it evaluates at once
  int64_t pid = 0;
  bool operator==(const RunnerHello&) const = default;
};
struct Heartbeat {
  int busy = 0;  // jobs in progress
  bool operator==(const Heartbeat&) const = default;
};
// A job's answer names the job three ways, all echoed from it: its id, the server instance that
// sent it, and its task digest. Job ids restart at 1 in every server process, so an id alone could
// credit the answer to a job of a later server (a runner still evaluating when the server
// restarted); the server drops an answer whose instance or digest is not its job's.
struct JobDone {
  uint64_t job_id = 0;
  std::string instance;     // Job::instance
  std::string task_digest;  // Job::task_digest
  EvalResult result;        // with raw timing samples
};
using FromRunner = std::variant<RunnerHello, Heartbeat, JobDone>;

// ---- server -> runner ----
struct Welcome {
  double heartbeat_interval_s = 0.5;  // how often the runner must heartbeat
  bool operator==(const Welcome&) const = default;
};
struct JobOptions {
  std::vector<uint64_t> seeds;   // correctness seeds (server-chosen: rule 1 of reward integrity)
  uint64_t timing_seed = 0;
  bool run_timing = true;
  double timing_budget_s = 1.0;
  int min_rounds = 15;
  double target_relative_ci = 0.03;
  bool operator==(const JobOptions&) const = default;
};
struct Job {
  uint64_t job_id = 0;   // unique within one server process (instance)
  std::string instance;  // the server process that sent it (random per process)
  std::string backend;
  std::string task;    // task id; the runner loads the task from its own suites
  std::string task_digest;  // the server's Task::digest: a runner whose copy differs refuses the job
  std::string source;  // the candidate
  JobOptions options;
  bool operator==(const Job&) const = default;
};
struct Ack {
  bool operator==(const Ack&) const = default;
};
struct Reregister {
  bool operator==(const Reregister&) const = default;
};
using ToRunner = std::variant<Welcome, Job, Ack, Reregister>;

// Codec (env/protocol/runner_codec.cc). Decoding never throws: nullopt + `problem`.
std::string Encode(const FromRunner& message);
std::string Encode(const ToRunner& message);
[[nodiscard]] std::optional<FromRunner> DecodeFromRunner(std::string_view bytes, std::string& problem);
[[nodiscard]] std::optional<ToRunner> DecodeToRunner(std::string_view bytes, std::string& problem);

}  // namespace kernelgym::protocol::runner
