// The `health` op and the `kernelgym health` probe command against a real `kernelgym serve` and
// a real `kernelgym runner --health-file` (docs/deploy.md): status and counts, readiness by
// backend, "draining" after SIGTERM, and the runner's file for liveness.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include "core/subprocess.h"
#include "env/client/client.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

client::ClientOptions Options(const ServerProcess& server) {
  return client::ClientOptions{.endpoint = server.clients(), .request_timeout_s = 30};
}

// `kernelgym health ARGS...`: its exit code and its one line.
struct Probe {
  int code = -1;
  std::string line;
};
Probe RunHealth(const std::vector<std::string>& args) {
  SpawnOptions spawn;
  spawn.argv = {KERNELGYM_CLI, "health"};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  const ProcessResult r = RunProcess(spawn, 60);
  EXPECT_FALSE(r.timed_out) << r.Describe(60);
  return {r.exit_code, r.stdout_text + r.stderr_text};
}

protocol::EnvMakeRequest NullEnv() {
  protocol::EnvMakeRequest r;
  r.task = "cpu/softmax_rows";
  r.backend = "null";
  return r;
}

TEST(HealthTest, TheServerAnswersStatusSessionsAndRunnersAndTheProbeAgrees) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  client::Client c(Options(server));
  protocol::HealthResult h = c.Health();
  EXPECT_EQ(h.status, "ok");
  EXPECT_GE(h.uptime_s, 0);
  EXPECT_EQ(h.sessions, 0u);
  EXPECT_TRUE(h.runners.empty());  // the null backend is answered in process
  EXPECT_EQ(h.queued, 0u);
  const protocol::EnvInfo a = c.Make(NullEnv());
  c.Make(NullEnv());
  EXPECT_EQ(c.Health().sessions, 2u);
  c.Close(a.env);
  EXPECT_EQ(c.Health().sessions, 1u);

  Probe live = RunHealth({"--connect", server.clients(), "--timeout-s", "10"});
  EXPECT_EQ(live.code, 0) << live.line;
  EXPECT_EQ(live.line.rfind("ok: ", 0), 0u) << live.line;
  EXPECT_NE(live.line.find("1 sessions"), std::string::npos) << live.line;
  Probe ready = RunHealth({"--connect", server.clients(), "--require-backend", "cpu"});
  EXPECT_EQ(ready.code, 1) << ready.line;
  EXPECT_NE(ready.line.find("no runner for backend 'cpu'"), std::string::npos) << ready.line;

  // A runner joins, with a health file: readiness for cpu passes, for pallas it does not.
  const std::filesystem::path file = server.dir() / "runner-health.json";
  pid_t runner = SpawnLogged({KERNELGYM_CLI, "runner", "--connect", server.runners(), "--health-file", file.string()},
                             server.dir() / "runner.log");
  struct Reap {  // a failed ASSERT below must not leave the runner running
    pid_t& pid;
    ~Reap() {
      if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  } reap{runner};
  ASSERT_TRUE(WaitFor([&] { return c.Health().runners["cpu"] == 1; }, 60)) << ReadText(server.dir() / "runner.log");
  ready = RunHealth({"--connect", server.clients(), "--require-backend", "cpu"});
  EXPECT_EQ(ready.code, 0) << ready.line;
  EXPECT_NE(ready.line.find("runners cpu=1"), std::string::npos) << ready.line;
  ready = RunHealth({"--connect", server.clients(), "--require-backend", "cpu", "--require-backend", "pallas"});
  EXPECT_EQ(ready.code, 1) << ready.line;
  EXPECT_NE(ready.line.find("'pallas'"), std::string::npos) << ready.line;

  // The runner's liveness file: written once it heard from the server, kept fresh.
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(file); }, 30));
  const nlohmann::json contents = nlohmann::json::parse(ReadText(file));
  EXPECT_EQ(contents.at("endpoint"), server.runners());
  EXPECT_FALSE(contents.at("runner_id").get<std::string>().empty());
  Probe fresh = RunHealth({"--file", file.string(), "--max-age-s", "30"});
  EXPECT_EQ(fresh.code, 0) << fresh.line;
  EXPECT_NE(fresh.line.find(contents.at("runner_id").get<std::string>()), std::string::npos) << fresh.line;
  kill(runner, SIGTERM);
  int status = 0;
  waitpid(runner, &status, 0);
  runner = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadText(server.dir() / "runner.log");
  // The runner is gone: nothing rewrites the file. Aged by hand rather than by waiting.
  const time_t old = time(nullptr) - 300;
  const utimbuf times{old, old};
  ASSERT_EQ(utime(file.c_str(), &times), 0);
  Probe stale = RunHealth({"--file", file.string(), "--max-age-s", "60"});
  EXPECT_EQ(stale.code, 1) << stale.line;
  EXPECT_NE(stale.line.find("has not heard from its server"), std::string::npos) << stale.line;
  Probe missing = RunHealth({"--file", (server.dir() / "no-such-file").string()});
  EXPECT_EQ(missing.code, 1) << missing.line;
  EXPECT_NE(missing.line.find("no health file"), std::string::npos) << missing.line;
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(HealthTest, ADrainingServerSaysSoAndOnlyLivenessPasses) {
  // A reset in flight that no runner will take keeps the server draining after SIGTERM.
  ServerProcess server({"--local-runners", "0", "--null-backend", "--drain-timeout", "30"});
  client::Client c(Options(server));
  protocol::EnvMakeRequest make = NullEnv();
  make.backend = "cpu";
  const protocol::EnvInfo env = c.Make(make);
  c.Send(protocol::EnvResetRequest{env.env, 1});
  ASSERT_TRUE(WaitFor([&] { return c.Health().queued == 1; }, 10));
  kill(server.pid(), SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return c.Health().status == "draining"; }, 10));
  EXPECT_EQ(c.Health().sessions, 1u);
  Probe ready = RunHealth({"--connect", server.clients()});
  EXPECT_EQ(ready.code, 1) << ready.line;
  EXPECT_NE(ready.line.find("draining"), std::string::npos) << ready.line;
  Probe live = RunHealth({"--connect", server.clients(), "--allow-draining"});
  EXPECT_EQ(live.code, 0) << live.line;
  // Other new work is refused meanwhile.
  EXPECT_THROW(c.Make(NullEnv()), client::ServerError);
}

TEST(HealthTest, AnUnreachableServerIsUnhealthyWithinTheTimeout) {
  std::string endpoint;
  {
    ServerProcess server({"--local-runners", "0"});
    endpoint = server.clients();
  }  // killed: nobody listens there now
  const auto start = std::chrono::steady_clock::now();
  Probe probe = RunHealth({"--connect", endpoint, "--timeout-s", "0.5"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
  EXPECT_EQ(probe.code, 1) << probe.line;
  EXPECT_EQ(probe.line.rfind("unhealthy: ", 0), 0u) << probe.line;
  EXPECT_EQ(probe.line.find("not idempotent"), std::string::npos) << probe.line;  // one attempt was asked for
  Probe usage = RunHealth({});
  EXPECT_EQ(usage.code, 2) << usage.line;
  Probe both = RunHealth({"--connect", endpoint, "--file", "x"});
  EXPECT_NE(both.code, 0) << both.line;
}

}  // namespace
}  // namespace kernelgym::testing
