// `kernelgym serve`: flags onto ServerOptions, signals onto the stop flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "env/server/server.h"

namespace kernelgym {

struct ServeCommand {
  server::ServerOptions options;
  std::string known_backends = "cpu";
  CLI::App* app = nullptr;
};

// Adds the subcommand and its flags (bound to `command`) to `app`.
void AddServeCommand(CLI::App& app, ServeCommand& command);
// Runs the server until SIGTERM/SIGINT; `suites` is the command line's --suites.
int RunServeCommand(ServeCommand& command, const std::string& suites);

}  // namespace kernelgym
