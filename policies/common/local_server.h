// A `kernelgym serve` of one's own, for the policy commands (`kernelgym agent`, `kernelgym hitl`)
// when no --connect is given: the same binary started as a child process on a free loopback port
// with one local runner, stopped (SIGTERM, then SIGKILL) when this object goes away. The policy
// still talks to it only through the protocol, like to any remote server.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kernelgym::policies {

class LocalServer {
 public:
  // Starts `binary serve --bind tcp://127.0.0.1:* --local-runners N --endpoint-file ... <extra>`
  // and waits (up to `timeout_s`) until it listens. nullptr with `error` (the command, how it
  // ended and the end of its log) when it does not come up.
  static std::unique_ptr<LocalServer> Start(const std::filesystem::path& binary, int runners,
                                            const std::vector<std::string>& extra, double timeout_s,
                                            std::string& error);
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // the clients' endpoint
  const std::filesystem::path& log() const { return log_; }  // the server's stderr

 private:
  LocalServer() = default;
  pid_t pid_ = -1;
  std::filesystem::path dir_, log_;
  std::string endpoint_;
};

// The running executable (/proc/self/exe): the `kernelgym` binary the policy commands live in.
std::filesystem::path SelfExecutable();

}  // namespace kernelgym::policies
