#include "cli/health_command.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "env/client/client.h"

namespace kernelgym {
namespace {

std::string RunnersText(const std::map<std::string, int64_t>& runners) {
  std::string text;
  for (const auto& [backend, n] : runners) text += fmt::format("{}{}={}", text.empty() ? "" : ",", backend, n);
  return text.empty() ? "none" : text;
}

int ProbeServer(const HealthCommand& c, std::ostream& out) {
  protocol::HealthResult health;
  try {
    // One attempt: the probe's period is the retry, and a probe must answer within its timeout.
    client::Client client({.endpoint = c.connect, .request_timeout_s = c.timeout_s, .retries = 0});
    health = client.Health();
  } catch (const client::ClientError& e) {
    out << "unhealthy: " << c.connect << ": " << e.what() << "\n";
    return 1;
  }
  const std::string summary =
      fmt::format("{}: {}, up {:.0f} s, {} sessions, runners {}, {} queued, {} running", c.connect, health.status,
                  health.uptime_s, health.sessions, RunnersText(health.runners), health.queued, health.running);
  if (health.status != "ok" && !(c.allow_draining && health.status == "draining")) {
    out << "unhealthy: " << summary << "\n";
    return 1;
  }
  for (const std::string& backend : c.require_backends) {
    auto it = health.runners.find(backend);
    if (it == health.runners.end() || it->second < 1) {
      out << "not ready: no runner for backend '" << backend << "' (" << summary << ")\n";
      return 1;
    }
  }
  out << "ok: " << summary << "\n";
  return 0;
}

// The runner writes its file by rename, so the mtime is the moment it last heard from its server.
int ProbeFile(const HealthCommand& c, std::ostream& out) {
  struct stat st {};
  if (stat(c.file.c_str(), &st) != 0) {
    out << "unhealthy: no health file at " << c.file << " (the runner writes it once it hears from its server)\n";
    return 1;
  }
  const double age_s = std::difftime(std::time(nullptr), st.st_mtim.tv_sec) - st.st_mtim.tv_nsec / 1e9;
  std::string who;
  try {
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(c.file));
    who = fmt::format(" (runner {}, server {})", j.value("runner_id", "?"), j.value("endpoint", "?"));
  } catch (const nlohmann::json::exception&) {  // the age is what counts; the contents only help the message
  }
  if (age_s > c.max_age_s) {
    out << fmt::format("unhealthy: {} is {:.0f} s old, more than {:g} s: the runner has not heard from its server{}\n",
                       c.file, age_s, c.max_age_s, who);
    return 1;
  }
  out << fmt::format("ok: {} is {:.1f} s old{}\n", c.file, std::max(age_s, 0.0), who);
  return 0;
}

}  // namespace

void AddHealthCommand(CLI::App& app, HealthCommand& c) {
  c.app = app.add_subcommand("health",
                             "probe a server (--connect) or a runner's health file (--file); exit 0 when healthy");
  CLI::Option* connect =
      c.app->add_option("--connect", c.connect, "a server's client endpoint, e.g. tcp://127.0.0.1:5555");
  CLI::Option* file = c.app->add_option("--file", c.file, "a runner's --health-file");
  connect->excludes(file);
  c.app->add_option("--timeout-s", c.timeout_s, "seconds to wait for the server's answer")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0))
      ->needs(connect);
  c.app
      ->add_option("--require-backend", c.require_backends,
                   "readiness: at least one connected runner for this backend (repeatable)")
      ->needs(connect);
  c.app
      ->add_flag("--allow-draining", c.allow_draining,
                 "liveness: a draining server (SIGTERM received, finishing its steps) is healthy too")
      ->needs(connect);
  c.app->add_option("--max-age-s", c.max_age_s, "the most seconds since the runner last heard from its server")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6))
      ->needs(file);
}

int RunHealthCommand(const HealthCommand& c, std::ostream& out) {
  if (!c.connect.empty()) return ProbeServer(c, out);
  if (!c.file.empty()) return ProbeFile(c, out);
  out << "health: say --connect ENDPOINT (a server) or --file PATH (a runner's --health-file)\n";
  return 2;
}

}  // namespace kernelgym
