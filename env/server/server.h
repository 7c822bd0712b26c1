// `kernelgym serve`: the environment server. One event loop thread owns every session, the
// scheduler and both ROUTER sockets (clients, runners); evaluations run in runner processes and
// come back as messages; the trajectory store writes on its own thread and says when a record is
// durable, and only then is the reply of a recorded step sent. Nothing a client sends can stop
// the loop: every request gets a reply (a result or an error naming the op and the field).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "env/server/quotas.h"
#include "env/server/scheduler.h"

namespace kernelgym::server {

// CURVE on the server's sockets (docs/security.md). Without a server key both sockets are
// plaintext, which the server accepts only on loopback endpoints and never with `strict`.
struct SecurityOptions {
  std::filesystem::path server_key;     // the server's key pair (`kernelgym keys generate`): CURVE on
  std::filesystem::path allow_clients;  // a folder of client .pub files (or one file)
  std::filesystem::path allow_runners;  // a folder of runner .pub files (or one file); local runners get their own
  bool strict = false;                  // refuse to run without CURVE, loopback included
};

// Checks `security` against the endpoints before anything is bound: "" when the combination is
// allowed, else why not (e.g. a non-loopback bind without a server key).
std::string CheckSecurity(const SecurityOptions& security, const std::string& client_endpoint,
                          const std::string& runner_endpoint);

struct ServerOptions {
  std::string client_endpoint = "tcp://127.0.0.1:5555";  // "tcp://127.0.0.1:*": any free port
  std::string runner_endpoint = "tcp://127.0.0.1:*";
  std::filesystem::path suites_root;        // tasks (datasets/suites by default)
  std::vector<std::string> known_backends{"cpu"};  // accepted by env.make before a runner joins
  bool null_backend = false;                 // the in-process `null` backend (benchmarks, tests)
  // `null` evaluations go to runners serving it (`kernelgym runner --backend null`) instead:
  // benchmarks of the runner pool (bench/pool_bench.py) without a compiler in the way.
  bool null_backend_on_runners = false;
  int local_runners = 1;                     // `kernelgym runner` processes to start and supervise
  std::vector<std::string> runner_argv;      // the runner command line (without --connect)
  int64_t default_max_steps = 16;
  double default_time_budget_s = 600;
  int64_t max_steps_limit = 10000;
  std::size_t max_sessions = 100000;
  // The server's heap (malloc's bytes in use, measured once a second): at or past it, env.make,
  // env.fork and env.step are refused with OVERLOADED (reason "memory") until envs are closed.
  // 0: no bound. deploy/server.yaml sets it below the container's memory limit.
  std::size_t max_heap_bytes = 0;
  // Replies the server holds for clients that do not read them, summed over every connection
  // (each connection has its own 64 MiB bound too): past it, such replies are dropped and counted.
  std::size_t max_outbox_bytes = std::size_t{1} << 30;
  double session_idle_timeout_s = 1800;      // an env with no request for this long is closed
  std::filesystem::path record_dir = "trajectories";  // the trajectory store (opened on first use)
  double drain_timeout_s = 60;               // on SIGTERM: how long in-flight steps may finish
  std::filesystem::path endpoint_file;       // if set: {"clients": ..., "runners": ...} written here
  // If set: Prometheus metrics over plain HTTP (GET /metrics) on this ZeroMQ tcp endpoint, e.g.
  // tcp://0.0.0.0:9464 (metrics.h). Unauthenticated and read-only: counters, no env contents.
  std::string metrics_endpoint;
  SchedulerOptions scheduler;
  SecurityOptions security;
  QuotaOptions quotas;  // per client (quotas.h)
};

// Runs until `stop` becomes true (SIGTERM/SIGINT), then drains: refuses new work, lets in-flight
// steps finish (or fails them after drain_timeout_s), flushes the recorder, stops local runners.
// Returns the process exit code (0 on a clean stop, 2 when it could not start).
int RunServer(const ServerOptions& options, const std::atomic<bool>& stop);

}  // namespace kernelgym::server
