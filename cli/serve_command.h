// `kernelgym serve`: flags onto ServerOptions, signals onto the stop flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "env/server/server.h"

namespace kernelgym {

struct ServeCommand {
  server::ServerOptions options;
  std::string known_backends = "cpu";
  std::string local_runner_backends = "cpu";  // what each local runner serves
  CLI::App* app = nullptr;
};

// Adds the subcommand and its flags (bound to `command`) to `app`.
void AddServeCommand(CLI::App& app, ServeCommand& command);
// Runs the server until SIGTERM/SIGINT; `suites` is the command line's --suites.
int RunServeCommand(ServeCommand& command, const std::string& suites);

}  // namespace kernelgym
