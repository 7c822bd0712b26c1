// A real `kernelgym serve` process for the server tests: bound to tcp://127.0.0.1:* (any free
// port), its endpoints read from --endpoint-file, its log kept in a file and printed when a test
// fails, stopped with SIGTERM (or killed) at the end.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/subprocess.h"
#include "eval_fixture.h"

namespace kernelgym::testing {

// Polls `condition` until it holds or `seconds` pass (no fixed sleeps as synchronization).
template <typename F>
bool WaitFor(F condition, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// Starts `argv` with stdout+stderr appended to `log`; in its own process group.
inline pid_t SpawnLogged(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

class ServerProcess {
 public:
  // Extra flags after `serve` (e.g. {"--local-runners", "0", "--null-backend"}). `bind` and
  // `runner_bind`: the endpoints (another server's, to restart it in place).
  explicit ServerProcess(std::vector<std::string> flags, std::string bind = "tcp://127.0.0.1:*",
                         std::string runner_bind = "tcp://127.0.0.1:*") {
    static int counter = 0;
    dir_ = TestTempDir() / ("server-" + std::to_string(++counter));
    std::filesystem::create_directories(dir_);
    std::vector<std::string> argv{KERNELGYM_CLI,     "serve",
                                  "--bind",          bind,
                                  "--runner-bind",   runner_bind,
                                  "--endpoint-file", (dir_ / "endpoints.json").string(),
                                  "--record-dir",    (dir_ / "store").string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid_ = SpawnLogged(argv, log());
    const bool up = WaitFor([&] { return std::filesystem::exists(dir_ / "endpoints.json"); }, 60);
    EXPECT_TRUE(up) << "the server did not start:\n" << ReadText(log());
    if (up) {
      const auto j = nlohmann::json::parse(ReadText(dir_ / "endpoints.json"));
      clients_ = j.at("clients").get<std::string>();
      runners_ = j.at("runners").get<std::string>();
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (::testing::Test::HasFailure()) std::cerr << "---- server log ----\n" << ReadText(log()) << "--------------------\n";
  }

  // SIGTERM, then the exit code (nullopt if it did not exit within `seconds`).
  std::optional<int> Terminate(double seconds = 60) {
    kill(pid_, SIGTERM);
    std::optional<int> code;
    WaitFor(
        [&] {
          int status = 0;
          if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
          code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pid_ = -1;
          return true;
        },
        seconds);
    return code;
  }

  // SIGKILL, and reaped.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  const std::string& clients() const { return clients_; }
  const std::string& runners() const { return runners_; }
  std::filesystem::path store() const { return dir_ / "store"; }
  std::filesystem::path log() const { return dir_ / "server.log"; }
  const std::filesystem::path& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::string clients_, runners_;
};

#ifdef KERNELGYM_CLI
// `kernelgym ARGS...` as a child process with this process's environment, to completion.
inline ProcessResult RunCli(const std::vector<std::string>& args, double timeout_s = 600) {
  SpawnOptions options;
  options.argv = {KERNELGYM_CLI};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e; ++e) options.env.push_back(*e);
  return RunProcess(options, timeout_s);
}
#endif

}  // namespace kernelgym::testing
