#include "cli/serve_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <sstream>

namespace kernelgym {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }  // lock-free atomic store: async-signal-safe

}  // namespace

void AddServeCommand(CLI::App& app, ServeCommand& command) {
  server::ServerOptions& o = command.options;
  CLI::App* serve = app.add_subcommand("serve", "run the environment server (clients and runners connect over ZeroMQ)");
  command.app = serve;
  serve->add_option("--bind", o.client_endpoint, "client endpoint (tcp://HOST:PORT; port * = any)")->capture_default_str();
  serve->add_option("--runner-bind", o.runner_endpoint, "runner endpoint")->capture_default_str();
  serve->add_option("--local-runners", o.local_runners, "runner processes to start on this host")
      ->capture_default_str()->check(CLI::Range(0, 256));
  serve->add_option("--backends", command.known_backends, "backends env.make accepts before a runner joins (comma list)")
      ->capture_default_str();
  serve->add_option("--local-runner-backends", command.local_runner_backends,
                    "backends each local runner serves (comma list, e.g. cpu,pallas)")
      ->capture_default_str();
  serve->add_flag("--null-backend", o.null_backend, "enable the in-process `null` backend (benchmarks)");
  serve->add_flag("--null-backend-runners", o.null_backend_on_runners,
                  "enable the `null` backend, evaluated by runners serving it (runner pool benchmarks)");
  serve->add_option("--max-steps", o.default_max_steps, "default steps per episode")->capture_default_str();
  serve->add_option("--time-budget", o.default_time_budget_s, "default evaluation seconds per episode")
      ->capture_default_str();
  serve->add_option("--metrics-bind", o.metrics_endpoint,
                    "serve Prometheus metrics over HTTP here (GET /metrics), e.g. tcp://0.0.0.0:9464");
  serve
      ->add_option("--max-heap-bytes", o.max_heap_bytes,
                   "refuse env.make, env.fork and env.step (OVERLOADED) while the heap holds this much (0: no bound)")
      ->capture_default_str();
  serve->add_option("--max-sessions", o.max_sessions, "envs held at once")->capture_default_str();
  serve->add_option("--max-outbox-bytes", o.max_outbox_bytes,
                    "replies held for clients that do not read them, all connections together")
      ->capture_default_str();
  serve->add_option("--idle-timeout", o.session_idle_timeout_s, "seconds after which an idle env is closed")
      ->capture_default_str();
  serve->add_option("--record-dir", o.record_dir, "trajectory store (used by envs made with record=true)")
      ->capture_default_str();
  serve->add_option("--drain-timeout", o.drain_timeout_s, "on SIGTERM, seconds in-flight steps may take")
      ->capture_default_str();
  serve->add_option("--endpoint-file", o.endpoint_file, "write the bound endpoints here as JSON");
  serve->add_option("--heartbeat", o.scheduler.heartbeat_interval_s, "runner heartbeat interval (s)")
      ->capture_default_str();
  serve->add_option("--runner-timeout", o.scheduler.runner_timeout_s, "silence after which a runner is dropped (s)")
      ->capture_default_str();
  serve->add_option("--max-queue", o.scheduler.max_queued_jobs, "queued evaluations per backend before OVERLOADED")
      ->capture_default_str();
  serve->add_option("--no-runner-wait", o.scheduler.no_runner_wait_s, "seconds a step waits for a runner")
      ->capture_default_str();
  // CURVE (docs/security.md).
  serve->add_option("--server-key", o.security.server_key,
                    "the server's key pair (NAME.key from `kernelgym keys generate`): CURVE on both sockets");
  serve->add_option("--allow-clients", o.security.allow_clients, "CURVE: a folder of client .pub files (or one file)");
  serve->add_option("--allow-runners", o.security.allow_runners, "CURVE: a folder of runner .pub files (or one file)");
  serve->add_flag("--strict-auth", o.security.strict, "refuse to run without CURVE, even bound to loopback");
  // Per-client quotas (docs/server.md); 0: no limit.
  serve->add_option("--quota-sessions", o.quotas.max_sessions, "open envs per client (0: no limit)")
      ->capture_default_str();
  serve->add_option("--quota-in-flight", o.quotas.max_in_flight, "resets and steps being evaluated per client")
      ->capture_default_str();
  serve->add_option("--quota-eval-seconds", o.quotas.eval_seconds_per_minute,
                    "runner seconds of evaluation per client in any 60 s")
      ->capture_default_str();
}

int RunServeCommand(ServeCommand& command, const std::string& suites) {
  server::ServerOptions& o = command.options;
  o.suites_root = suites;
  o.known_backends.clear();
  std::stringstream list(command.known_backends);
  for (std::string name; std::getline(list, name, ',');)
    if (!name.empty()) o.known_backends.push_back(name);
  // Local runners are this same program: `kernelgym --suites S runner --connect ...`.
  const spdlog::string_view_t level = spdlog::level::to_string_view(spdlog::get_level());
  o.runner_argv = {std::filesystem::read_symlink("/proc/self/exe").string(),
                   "--suites",
                   suites,
                   "--log-level",
                   std::string(level.data(), level.size()),
                   "runner"};
  std::stringstream runner_backends(command.local_runner_backends);
  for (std::string name; std::getline(runner_backends, name, ',');) {
    if (name.empty()) continue;
    o.runner_argv.insert(o.runner_argv.end(), {"--backend", name});
    // What local runners serve, env.make accepts from the start.
    if (std::find(o.known_backends.begin(), o.known_backends.end(), name) == o.known_backends.end())
      o.known_backends.push_back(name);
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return server::RunServer(o, g_stop);
}

}  // namespace kernelgym
