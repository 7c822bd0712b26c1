// `kernelgym health`: the probe command for process supervisors (Kubernetes liveness and
// readiness probes, docs/deploy.md). Two modes:
//   --connect ENDPOINT [--require-backend B]...  asks a server's `health` op (docs/protocol.md):
//       healthy when it answers within --timeout-s with status "ok" and, for readiness, has at
//       least one connected runner for every required backend. --allow-draining (liveness) also
//       counts a draining server as healthy: it is finishing its steps and must not be killed.
//   --file PATH --max-age-s S                    a runner's --health-file: healthy when the runner
//       rewrote it within the last S seconds (it does whenever it hears from its server).
// Prints one line (why, when not healthy) and exits 0 when healthy, 1 when not, 2 on bad usage.
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <string>
#include <vector>

namespace kernelgym {

struct HealthCommand {
  std::string connect;                        // a server's client endpoint, e.g. tcp://127.0.0.1:5555
  double timeout_s = 5;                       // for the server's answer (one attempt: a probe retries itself)
  std::vector<std::string> require_backends;  // readiness: at least one runner for each
  bool allow_draining = false;                // liveness: "draining" is healthy too
  std::string file;                           // a runner's --health-file
  double max_age_s = 60;                      // how old the file may be
  CLI::App* app = nullptr;
};

// Adds the subcommand and its flags (bound to `command`) to `app`.
void AddHealthCommand(CLI::App& app, HealthCommand& command);
// Runs the probe; the one line goes to `out`.
int RunHealthCommand(const HealthCommand& command, std::ostream& out);

}  // namespace kernelgym
