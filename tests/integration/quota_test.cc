// Per-client quotas end to end (docs/server.md, "Quotas"): a real `kernelgym serve` with a local
// runner, two real clients (two connections: on a plaintext loopback server each connection is a
// client). Only the client over a quota is refused, with OVERLOADED naming the quota and a retry
// hint; the other is served as if the first were not there.
#include <gtest/gtest.h>

#include "env/client/client.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

using client::Client;
using client::ClientOptions;
using client::ServerError;

ClientOptions Options(const ServerProcess& server) {
  return ClientOptions{.endpoint = server.clients(), .request_timeout_s = 120};
}

protocol::EnvMakeRequest Softmax() {
  protocol::EnvMakeRequest r;
  r.task = "cpu/softmax_rows";
  return r;
}

// The quota an OVERLOADED error names, "" for any other outcome.
std::string QuotaOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const ServerError& e) {
    if (e.code() == protocol::ErrorCode::kOverloaded && e.details().count("quota")) {
      EXPECT_GT(std::stod(e.details().at("retry_after_s")), 0) << e.what();
      return e.details().at("quota");
    }
    return std::string("other error: ") + e.what();
  }
  return "";
}

TEST(QuotaTest, SessionsAndInFlightQuotasRefuseOnlyTheClientOverThem) {
  ServerProcess server({"--local-runners", "1", "--quota-sessions", "3", "--quota-in-flight", "2"});
  Client a(Options(server)), b(Options(server));
  std::vector<std::string> envs;
  for (int i = 0; i < 3; ++i) envs.push_back(a.Make(Softmax()).env);
  EXPECT_EQ(QuotaOf([&] { a.Make(Softmax()); }), "sessions");
  const std::string b_env = b.Make(Softmax()).env;  // b has its own quota

  // Three resets at once from a: two are evaluated, the third is refused at once.
  for (const std::string& env : envs) a.Send(protocol::EnvResetRequest{env, 1});
  int reset = 0, refused = 0;
  bool b_served_meanwhile = false;
  for (int i = 0; i < 3; ++i) {
    const std::optional<client::Reply> reply = a.Recv(120);
    ASSERT_TRUE(reply);
    if (reply->ok) {
      ++reset;
    } else {
      ++refused;
      EXPECT_EQ(reply->error.details.at("quota"), "in_flight") << reply->error.message;
      // While a's two evaluations are in flight, b's reset is not refused.
      if (!b_served_meanwhile) {
        EXPECT_EQ(b.Reset(b_env, 1).observation.status, "ok");
        b_served_meanwhile = true;
      }
    }
  }
  EXPECT_EQ(reset, 2);
  EXPECT_EQ(refused, 1);
  EXPECT_TRUE(b_served_meanwhile);
  // The replies freed a's quota; closing an env frees a session.
  EXPECT_EQ(a.Reset(envs[2], 1).observation.status, "ok");
  a.Close(envs[0]);
  EXPECT_EQ(QuotaOf([&] { a.Make(Softmax()); }), "");
  const nlohmann::json quotas = a.Stats()["quotas"];
  EXPECT_EQ(quotas["max_in_flight"], 2);
  EXPECT_EQ(quotas["clients"].size(), 2u) << quotas.dump(2);
}

TEST(QuotaTest, AnEvaluationSecondsQuotaRefusesUntilTheMinuteHasRoom) {
  ServerProcess server({"--local-runners", "1", "--quota-eval-seconds", "0.01"});
  Client a(Options(server)), b(Options(server));
  const std::string env = a.Make(Softmax()).env;
  EXPECT_EQ(a.Reset(env, 1).observation.status, "ok");  // the first evaluation uses up the minute
  std::string quota;
  try {
    a.Step(env, protocol::KnobsAction{{{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}, {"RECOMPUTE", int64_t{0}}}});
  } catch (const ServerError& e) {
    quota = e.details().count("quota") ? e.details().at("quota") : e.what();
    const double retry = std::stod(e.details().at("retry_after_s"));
    EXPECT_GT(retry, 0);
    EXPECT_LE(retry, 60);
  }
  EXPECT_EQ(quota, "eval_seconds");
  const std::string b_env = b.Make(Softmax()).env;
  EXPECT_EQ(b.Reset(b_env, 1).observation.status, "ok");  // b's minute is its own
}

}  // namespace
}  // namespace kernelgym::testing
