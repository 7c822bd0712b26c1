// CURVE end to end (docs/security.md): a real `kernelgym serve` with a key and allow-lists, its
// local runner authenticated with the key the server gives it, and real clients and runners with
// and without keys. What an unauthenticated peer gets is asserted both ways: its own clear error,
// and the server never having read a request from it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/subprocess.h"
#include "env/client/client.h"
#include "env/security/keys.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

using client::AuthError;
using client::Client;
using client::ClientOptions;

struct Keys {
  std::filesystem::path dir;
  std::filesystem::path Key(const std::string& name) const { return dir / (name + ".key"); }
  std::filesystem::path Pub(const std::string& name) const { return dir / (name + ".pub"); }
};

// server, alice (allowed client), stranger (a valid key nobody allowed).
Keys MakeKeys() {
  static int counter = 0;
  Keys keys{TestTempDir() / ("keys-" + std::to_string(++counter))};
  std::filesystem::create_directories(keys.dir / "allowed-clients");
  for (const char* name : {"server", "alice", "stranger"}) {
    const ProcessResult r = RunCli({"keys", "generate", "--out", (keys.dir / name).string()});
    EXPECT_TRUE(r.ok()) << r.Describe() << r.stderr_text;
  }
  std::filesystem::copy_file(keys.Pub("alice"), keys.dir / "allowed-clients" / "alice.pub");
  return keys;
}

ClientOptions With(const ServerProcess& server, const Keys& keys, const std::string& server_pub,
                   const std::string& own) {
  ClientOptions options{.endpoint = server.clients(), .request_timeout_s = 20, .retries = 0};
  std::string error;
  options.curve = security::LoadClientKeys(keys.Pub(server_pub), keys.Key(own), error);
  EXPECT_TRUE(options.curve) << error;
  return options;
}

std::string AuthFailure(ClientOptions options) {
  try {
    Client client(std::move(options));
    client.Hello();
  } catch (const AuthError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an AuthError: ") + e.what();
  }
  return "no error: the server answered";
}

TEST(SecurityTest, OnACurveServerOnlyAllowedKeysGetAnyWorkDone) {
  const Keys keys = MakeKeys();
  ServerProcess server({"--local-runners", "1", "--server-key", keys.Key("server").string(), "--allow-clients",
                        (keys.dir / "allowed-clients").string()});

  // The allowed client plays a step, evaluated by the local runner over the CURVE runner socket.
  Client alice(With(server, keys, "server", "alice"));
  protocol::EnvMakeRequest make;
  make.task = "cpu/softmax_rows";
  const std::string env = alice.Make(make).env;
  alice.Reset(env);
  const protocol::StepResult step =
      alice.Step(env, protocol::KnobsAction{{{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}, {"RECOMPUTE", int64_t{0}}}});
  EXPECT_EQ(step.observation.status, "ok") << step.observation.message;
  const nlohmann::json before = alice.Stats();

  // A valid key that is not on the allow-list, a plaintext client, a client that trusts the
  // wrong server key: each gets an AuthError saying why, at once.
  EXPECT_NE(AuthFailure(With(server, keys, "server", "stranger")).find("not on the server's allow-list"),
            std::string::npos);
  ::unsetenv("KERNELGYM_SERVER_KEY");  // no keys from the environment either
  ::unsetenv("KERNELGYM_CLIENT_KEY");
  ClientOptions plaintext{.endpoint = server.clients(), .request_timeout_s = 20, .retries = 0};
  EXPECT_NE(AuthFailure(plaintext).find("requires CURVE"), std::string::npos);
  EXPECT_NE(AuthFailure(With(server, keys, "stranger", "alice")).find("handshake"), std::string::npos);

  // ... and the server never read a request from them: its counters moved only by alice's stats call.
  const nlohmann::json after = alice.Stats();
  EXPECT_EQ(after["requests"].value("hello", 0), before["requests"].value("hello", 0));
  EXPECT_EQ(after["requests"].value("stats", 0), before["requests"].value("stats", 0) + 1);
  EXPECT_EQ(after["auth"]["curve"], true);
  EXPECT_GE(after["auth"]["handshakes_refused"].get<int>(), 1);

  // A runner with a key nobody allowed, and one without keys, stop with the reason; the server
  // still has exactly its one local runner.
  const ProcessResult stranger = RunCli({"runner", "--connect", server.runners(), "--server-key",
                                         keys.Pub("server").string(), "--runner-key", keys.Key("stranger").string()});
  EXPECT_EQ(stranger.exit_code, 2) << stranger.Describe();
  EXPECT_NE(stranger.stderr_text.find("not on the server's allow-list"), std::string::npos) << stranger.stderr_text;
  const ProcessResult bare = RunCli({"runner", "--connect", server.runners()});
  EXPECT_EQ(bare.exit_code, 2) << bare.Describe();
  EXPECT_NE(bare.stderr_text.find("requires CURVE"), std::string::npos) << bare.stderr_text;
  EXPECT_EQ(alice.Stats()["scheduler"]["runners"].size(), 1u);
}

TEST(SecurityTest, PlaintextBeyondLoopbackAndStrictWithoutKeysAreRefusedAtStart) {
  const ProcessResult open = RunCli({"serve", "--bind", "tcp://0.0.0.0:*", "--local-runners", "0"});
  EXPECT_EQ(open.exit_code, 2) << open.Describe();
  EXPECT_NE(open.stderr_text.find("beyond loopback needs CURVE"), std::string::npos) << open.stderr_text;
  const ProcessResult strict = RunCli({"serve", "--bind", "tcp://127.0.0.1:*", "--strict-auth", "--local-runners", "0"});
  EXPECT_EQ(strict.exit_code, 2) << strict.Describe();
  EXPECT_NE(strict.stderr_text.find("--strict-auth needs CURVE"), std::string::npos) << strict.stderr_text;
  const Keys keys = MakeKeys();
  const ProcessResult no_clients =
      RunCli({"serve", "--bind", "tcp://127.0.0.1:*", "--server-key", keys.Key("server").string()});
  EXPECT_EQ(no_clients.exit_code, 2) << no_clients.Describe();
  EXPECT_NE(no_clients.stderr_text.find("no client could connect"), std::string::npos) << no_clients.stderr_text;
}

TEST(SecurityTest, KeyFilesAreSecretNeverOverwrittenAndRefusedWhereAPairIsNeeded) {
  const Keys keys = MakeKeys();
  struct stat st {};
  ASSERT_EQ(stat(keys.Key("server").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const ProcessResult again = RunCli({"keys", "generate", "--out", (keys.dir / "server").string()});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.stderr_text.find("never overwritten"), std::string::npos) << again.stderr_text;
  std::string error;
  EXPECT_FALSE(security::LoadCertificate(keys.Pub("alice"), /*need_secret=*/true, error));
  EXPECT_NE(error.find("a key pair"), std::string::npos) << error;
  const auto pair = security::LoadCertificate(keys.Key("alice"), true, error);
  ASSERT_TRUE(pair) << error;
  EXPECT_EQ(security::LoadCertificate(keys.Pub("alice"), false, error)->public_key, pair->public_key);
}

TEST(SecurityTest, LoopbackIsTellable) {
  for (const char* e : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://localhost:1", "tcp://[::1]:5", "ipc:///tmp/x",
                        "inproc://y"})
    EXPECT_TRUE(security::IsLoopbackEndpoint(e)) << e;
  for (const char* e : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.2:1", "tcp://example.org:1", "tcp://[::]:5",
                        "udp://127.0.0.1:1"})
    EXPECT_FALSE(security::IsLoopbackEndpoint(e)) << e;
}

}  // namespace
}  // namespace kernelgym::testing
