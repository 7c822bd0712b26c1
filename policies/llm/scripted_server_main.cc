// kernelgym-scripted-llm: serves a chat-completions script (scripted_server.h) until SIGTERM or
// SIGINT, so an LLM policy can run end to end without a model.
//
//   kernelgym-scripted-llm --script FILE [--host 127.0.0.1] [--port 0] [--port-file F] [--log F]
//
// Exit status: 0 after a signal, 1 when it cannot bind or write its files, 2 for bad arguments or
// a bad script.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "policies/llm/scripted_server.h"

namespace {

constexpr const char* kName = "kernelgym-scripted-llm";

// Writes `text` under a temporary name and renames it into place, so a reader polling for the
// file (a test waiting for the port) never sees it half written.
bool WriteAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  return !error;
}

std::string RequestLog(const std::vector<kernelgym::llm::ScriptedRequest>& requests) {
  std::string text;
  for (const auto& request : requests) {
    // Whether a key came, never the key itself: logs get shared.
    const nlohmann::json line = {{"method", request.method},
                                 {"path", request.path},
                                 {"body", request.body},
                                 {"authorization", !request.authorization.empty()},
                                 {"status", request.status},
                                 {"arrived_s", request.arrived_s},
                                 {"answered_s", request.answered_s}};
    text += line.dump() + "\n";
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Serve an OpenAI-compatible chat-completions endpoint that answers from a script."};
  std::string script_file, host = "127.0.0.1", port_file, log_file;
  int port = 0;
  app.add_option("--script", script_file, "the script (JSON; see policies/llm/scripted_server.h)")->required();
  app.add_option("--host", host, "address to bind")->capture_default_str();
  app.add_option("--port", port, "port to bind (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--port-file", port_file, "write the bound port here once listening");
  app.add_option("--log", log_file,
                 "on exit, write one JSON line per request here (every path: \"path\" tells chat completions, "
                 "/v1/models and 404s apart)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  }

  std::unique_ptr<kernelgym::llm::ScriptedServer> server;
  try {
    server = kernelgym::llm::ScriptedServer::FromFile(script_file);
  } catch (const std::exception& e) {
    std::cerr << kName << ": bad script: " << e.what() << "\n";
    return 2;
  }

  // Block the stop signals before any thread starts, so every thread inherits the mask and the
  // main thread alone receives them through sigwait (no async handler to make safe).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  int bound = 0;
  try {
    bound = server->Start(host, port);
  } catch (const std::exception& e) {
    std::cerr << kName << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << kName << ": serving " << server->base_url() << std::endl;
  if (!port_file.empty() && !WriteAtomically(port_file, std::to_string(bound) + "\n")) {
    std::cerr << kName << ": cannot write --port-file " << port_file << "\n";
    return 1;
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server->Stop();

  if (!log_file.empty() && !WriteAtomically(log_file, RequestLog(server->all_requests()))) {
    std::cerr << kName << ": cannot write --log " << log_file << "\n";
    return 1;
  }
  return 0;
}
