#include "policies/common/local_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

extern char** environ;

namespace kernelgym::policies {
namespace {

std::string Tail(const std::filesystem::path& file, std::size_t bytes) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

}  // namespace

std::filesystem::path SelfExecutable() { return std::filesystem::read_symlink("/proc/self/exe"); }

std::unique_ptr<LocalServer> LocalServer::Start(const std::filesystem::path& binary, int runners,
                                                const std::vector<std::string>& extra, double timeout_s,
                                                std::string& error) {
  std::unique_ptr<LocalServer> server(new LocalServer());
  char dir_template[] = "/tmp/kernelgym-local-XXXXXX";
  if (!mkdtemp(dir_template)) {
    error = "cannot create a folder for the local server: " + std::string(strerror(errno));
    return nullptr;
  }
  server->dir_ = dir_template;
  server->log_ = server->dir_ / "serve.log";
  const std::filesystem::path endpoint_file = server->dir_ / "endpoints.json";
  std::vector<std::string> args = {binary.string(), "serve", "--bind", "tcp://127.0.0.1:*", "--local-runners", std::to_string(runners),
                                   "--endpoint-file", endpoint_file.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, server->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&server->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = "cannot start `" + command + "`: " + strerror(rc);
    server->pid_ = -1;
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      server->pid_ = -1;
      error = "`" + command + "` exited (" +
              (WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status))
                                 : "signal " + std::to_string(WTERMSIG(status))) +
              ") before listening; its log:\n" + Tail(server->log_, 2000);
      return nullptr;
    }
    std::ifstream in(endpoint_file);
    const nlohmann::json endpoints = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (endpoints.is_object() && endpoints.contains("clients") && endpoints["clients"].is_string()) {
      server->endpoint_ = endpoints["clients"].get<std::string>();
      return server;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a file the child writes once
  }
  error = "`" + command + "` did not listen within " + std::to_string(timeout_s) + " s; its log:\n" +
          Tail(server->log_, 2000);
  return nullptr;  // the destructor stops it
}

LocalServer::~LocalServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace kernelgym::policies
