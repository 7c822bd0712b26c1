// The server's side of CURVE (docs/security.md): which endpoints may stay plaintext, the ZAP
// handler with the client and runner allow-lists, and keys for the server's own local runners.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "env/security/curve_socket.h"
#include "env/server/server_loop.h"

namespace kernelgym::server {

std::string CheckSecurity(const SecurityOptions& security, const std::string& client_endpoint,
                          const std::string& runner_endpoint) {
  if (!security.server_key.empty()) {
    if (security.allow_clients.empty())
      return "--server-key without --allow-clients: no client could connect (give a folder of client .pub files)";
    return "";
  }
  if (security.strict)
    return "--strict-auth needs CURVE: give --server-key (kernelgym keys generate), --allow-clients and "
           "--allow-runners";
  for (const std::string& endpoint : {client_endpoint, runner_endpoint})
    if (!security::IsLoopbackEndpoint(endpoint))
      return "binding " + endpoint + " beyond loopback needs CURVE: give --server-key (kernelgym keys generate), "
             "--allow-clients and --allow-runners, or bind 127.0.0.1";
  return "";
}

namespace detail {

bool ServerLoop::SetUpSecurity(std::vector<std::string>& runner_argv) {
  const SecurityOptions& s = options_.security;
  const std::string problem =
      CheckSecurity(s, options_.client_endpoint, options_.runner_endpoint);
  if (!problem.empty()) {
    spdlog::error("{}", problem);
    return false;
  }
  if (s.server_key.empty()) return true;  // plaintext on loopback: the quick start

  std::string error;
  const auto server = security::LoadCertificate(s.server_key, /*need_secret=*/true, error);
  std::optional<security::AllowList> clients = security::LoadAllowList(s.allow_clients, error);
  std::optional<security::AllowList> runners =
      s.allow_runners.empty() ? security::AllowList{} : security::LoadAllowList(s.allow_runners, error);
  if (!server || !clients || !runners) {
    spdlog::error("CURVE: {}", error);
    return false;
  }
  zap_ = std::make_unique<security::ZapHandler>(
      context_, std::map<std::string, security::AllowList>{{"clients", *clients}, {"runners", *runners}},
      [](const std::string& domain, const std::string& /*key: named in the reason*/, const std::string& reason) {
        spdlog::warn("refused a {} handshake: {}", domain == "clients" ? "client" : "runner", reason);
      });
  if (s.allow_runners.empty() && options_.local_runners == 0)
    spdlog::warn("CURVE without --allow-runners and without local runners: no runner can connect");
  security::ApplyCurveServer(clients_, *server, "clients");
  security::ApplyCurveServer(runners_, *server, "runners");
  spdlog::info("CURVE on: {} client key(s), {} runner key(s) allowed", clients->size(), runners->size());

  if (options_.local_runners > 0 && !runner_argv.empty()) {
    // The local runners' own key pair, allowed on the runner socket and handed to them in a
    // private folder (0700): nothing else on the host can read it.
    char dir_template[] = "/tmp/kernelgym-runner-keys-XXXXXX";
    if (!mkdtemp(dir_template)) {
      spdlog::error("CURVE: cannot create a folder for the local runners' keys: {}", std::strerror(errno));
      return false;
    }
    runner_key_dir_ = dir_template;
    const security::KeyPair local = security::GenerateKeyPair();
    if (!security::WriteKeyPair(runner_key_dir_ / "local-runner", local, error) ||
        !security::WriteKeyPair(runner_key_dir_ / "server", security::KeyPair{server->public_key, ""}, error)) {
      spdlog::error("CURVE: {}", error);
      return false;
    }
    zap_->Allow("runners", local.public_key, "local-runner");
    runner_argv.insert(runner_argv.end(), {"--server-key", (runner_key_dir_ / "server.pub").string(), "--runner-key",
                                           (runner_key_dir_ / "local-runner.key").string()});
  }
  curve_ = true;
  return true;
}

void ServerLoop::RemoveRunnerKeys() {
  if (runner_key_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(runner_key_dir_, ec);
}

}  // namespace detail
}  // namespace kernelgym::server
