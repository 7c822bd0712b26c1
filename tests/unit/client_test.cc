// The C++ client against a scripted server: a ROUTER in a thread that reads requests with the
// real codec and answers (or does not) as each test says. Checks matching by id, buffering for
// sync calls made while async requests are pending, typed errors, timeouts and retries.
#include "env/client/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "env/protocol/codec.h"
#include "golden.h"

namespace kernelgym::client {
namespace {

using nlohmann::json;
namespace golden = protocol::golden;

// A scripted server. For each request, the handler (run on the server's thread) returns the
// replies to send now: any identity, any bytes, any order, or none (a dropped request).
class TestServer {
 public:
  struct Incoming {
    std::string identity;  // the client connection it came from
    protocol::DecodedRequest decoded;
  };
  struct Outgoing {
    std::string identity;
    std::string bytes;
  };
  using Handler = std::function<std::vector<Outgoing>(const Incoming&)>;

  explicit TestServer(Handler handler) : handler_(std::move(handler)), socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TestServer() {
    context_.shutdown();  // the blocking recv in Serve() returns ETERM
    thread_.join();
  }

  const std::string& endpoint() const { return endpoint_; }
  std::vector<std::string> ops() const {
    std::lock_guard lock(mutex_);
    return ops_;
  }
  std::vector<std::string> identities() const {
    std::lock_guard lock(mutex_);
    return identities_;
  }

 private:
  void Serve() {
    try {
      while (true) {
        zmq::message_t identity, payload;
        if (!socket_.recv(identity) || !identity.more() || !socket_.recv(payload)) continue;
        Incoming in{identity.to_string(), protocol::DecodeRequest(payload.to_string_view())};
        {
          std::lock_guard lock(mutex_);
          ops_.push_back(in.decoded.op);
          identities_.push_back(in.identity);
        }
        for (const Outgoing& out : handler_(in)) {
          socket_.send(zmq::buffer(out.identity), zmq::send_flags::sndmore);
          socket_.send(zmq::buffer(out.bytes), zmq::send_flags::none);
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != ETERM) ADD_FAILURE() << "test server: " << e.what();
    }
    socket_.close();
  }

  Handler handler_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> ops_;
  std::vector<std::string> identities_;
};

using Outgoing = TestServer::Outgoing;

// The golden result for each op (the same values the protocol fixtures pin down).
json GoldenResult(const std::string& op) {
  for (const auto& f : golden::Replies())
    if (f.ok && f.op == op) return f.result;
  ADD_FAILURE() << "no golden result for " << op;
  return json::object();
}

// A step result whose reward tells the replies apart.
protocol::StepResult StepWithReward(double reward) {
  protocol::StepResult step = golden::Step();
  step.reward = reward;
  return step;
}

// Answers every request at once with its golden result.
std::vector<Outgoing> AnswerGolden(const TestServer::Incoming& in) {
  const uint64_t id = in.decoded.request->id;
  return {{in.identity, protocol::EncodeResultReply(id, GoldenResult(in.decoded.op))}};
}

ClientOptions Options(const TestServer& server, double timeout_s = 30) {
  ClientOptions o;
  o.endpoint = server.endpoint();
  o.request_timeout_s = timeout_s;
  o.retries = 3;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  return o;
}

TEST(Client, EverySyncCallReturnsItsTypedResult) {
  TestServer server(AnswerGolden);
  Client client(Options(server));
  EXPECT_EQ(client.Hello(), golden::Hello());
  EXPECT_EQ(client.ListTasks("cpu"), golden::TaskList());
  EXPECT_EQ(client.GetTask("cpu/softmax_rows"), golden::SoftmaxTask());
  protocol::EnvMakeRequest make;
  make.task = "cpu/softmax_rows";
  EXPECT_EQ(client.Make(make), golden::MadeEnv());
  EXPECT_EQ(client.Reset("env-1", 12345), golden::Reset());
  EXPECT_EQ(client.Step("env-1", protocol::ReplaceAction{"int x;"}), golden::Step());
  EXPECT_EQ(client.Fork("env-1").env, "env-2");
  client.Close("env-2");
  EXPECT_EQ(client.Stats().at("steps"), 17);
  EXPECT_EQ(server.ops(), (std::vector<std::string>{"hello", "tasks.list", "tasks.get", "env.make", "env.reset",
                                                    "env.step", "env.fork", "env.close", "stats"}));
  EXPECT_EQ(client.outstanding(), 0u);
  EXPECT_EQ(client.stray_replies(), 0u);
}

TEST(Client, OutOfOrderRepliesAreMatchedById) {
  // Holds the first three requests, then answers them in reverse order.
  std::vector<TestServer::Incoming> held;
  TestServer server([&](const TestServer::Incoming& in) {
    held.push_back(in);
    std::vector<Outgoing> out;
    if (held.size() < 3) return out;
    for (auto it = held.rbegin(); it != held.rend(); ++it) {
      const protocol::Request& r = *it->decoded.request;
      const json result = it->decoded.op == "env.reset" ? ToWire(golden::Reset())
                                                        : ToWire(StepWithReward(static_cast<double>(r.id) / 10));
      out.push_back({it->identity, protocol::EncodeResultReply(r.id, result)});
    }
    return out;
  });
  Client client(Options(server));
  const uint64_t reset = client.Send(protocol::EnvResetRequest{"env-1", 7});
  const uint64_t step_a = client.Send(protocol::EnvStepRequest{"env-1", protocol::SubmitAction{}});
  const uint64_t step_b = client.Send(protocol::EnvStepRequest{"env-2", protocol::RevertAction{1}});
  EXPECT_EQ(client.outstanding(), 3u);

  std::vector<Reply> replies;
  while (replies.size() < 3) {
    std::optional<Reply> reply = client.Recv(30);
    ASSERT_TRUE(reply) << "no reply within 30 s";
    replies.push_back(*std::move(reply));
  }
  EXPECT_EQ(replies[0].id, step_b);
  EXPECT_EQ(replies[1].id, step_a);
  EXPECT_EQ(replies[2].id, reset);
  EXPECT_EQ(replies[0].op, "env.step");
  EXPECT_EQ(replies[2].op, "env.reset");
  EXPECT_EQ(AsStepResult(replies[0]), StepWithReward(static_cast<double>(step_b) / 10));
  EXPECT_EQ(AsStepResult(replies[1]), StepWithReward(static_cast<double>(step_a) / 10));
  EXPECT_EQ(AsResetResult(replies[2]), golden::Reset());
  EXPECT_EQ(client.outstanding(), 0u);
  EXPECT_FALSE(client.Recv(0)) << "nothing is outstanding";
}

TEST(Client, SyncCallWhileAsyncRepliesArePendingKeepsThem) {
  // Holds the steps; when hello comes, answers both steps first, then hello. The sync Hello()
  // must set the two step replies aside for Recv().
  std::vector<TestServer::Incoming> steps;
  TestServer server([&](const TestServer::Incoming& in) {
    std::vector<Outgoing> out;
    if (in.decoded.op == "env.step") {
      steps.push_back(in);
      return out;
    }
    for (const auto& s : steps)
      out.push_back({s.identity, protocol::EncodeResultReply(s.decoded.request->id, ToWire(StepWithReward(1.5)))});
    steps.clear();
    out.push_back({in.identity, protocol::EncodeHelloReply(in.decoded.request->id, golden::Hello())});
    return out;
  });
  Client client(Options(server));
  const uint64_t a = client.Send(protocol::EnvStepRequest{"env-1", protocol::SubmitAction{}});
  const uint64_t b = client.Send(protocol::EnvStepRequest{"env-2", protocol::SubmitAction{}});
  EXPECT_EQ(client.Hello(), golden::Hello());
  EXPECT_EQ(client.outstanding(), 2u);
  // Already here: Recv(0) does not wait.
  std::optional<Reply> first = client.Recv(0);
  std::optional<Reply> second = client.Recv(0);
  ASSERT_TRUE(first && second) << "the step replies that arrived during Hello() were lost";
  EXPECT_EQ(first->id, a);
  EXPECT_EQ(second->id, b);
  EXPECT_EQ(AsStepResult(*second).reward, 1.5);
  EXPECT_FALSE(client.Recv(0));
}

TEST(Client, ServerErrorCarriesTheCodeAndDetails) {
  TestServer server([](const TestServer::Incoming& in) {
    const std::string env = std::get<protocol::EnvResetRequest>(in.decoded.request->body).env;
    protocol::Error error{
        protocol::ErrorCode::kUnknownEnv, "env.reset: no env '" + env + "'", {{"op", "env.reset"}, {"env", env}}};
    return std::vector<Outgoing>{{in.identity, protocol::EncodeErrorReply(in.decoded.request->id, error)}};
  });
  Client client(Options(server));
  try {
    client.Reset("env-9");
    FAIL() << "no ServerError";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), protocol::ErrorCode::kUnknownEnv);
    EXPECT_EQ(e.details().at("env"), "env-9");
    EXPECT_EQ(e.details().at("op"), "env.reset");
    EXPECT_NE(std::string(e.what()).find("UNKNOWN_ENV"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("env-9"), std::string::npos) << e.what();
  }
  // Async: the error is a value in the Reply, and the typed helper raises the same error.
  const uint64_t id = client.Send(protocol::EnvResetRequest{"env-8", std::nullopt});
  std::optional<Reply> reply = client.Recv(30);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->id, id);
  EXPECT_FALSE(reply->ok);
  EXPECT_EQ(reply->error.code, protocol::ErrorCode::kUnknownEnv);
  EXPECT_THROW(AsResetResult(*reply), ServerError);
}

TEST(Client, StepTimeoutIsATransportErrorAndIsNotResent) {
  // Never answers a step at once; answers it late, just before the next request's reply.
  std::optional<TestServer::Incoming> held_step;
  TestServer server([&](const TestServer::Incoming& in) {
    std::vector<Outgoing> out;
    if (in.decoded.op == "env.step") {
      held_step = in;
      return out;
    }
    if (held_step)
      out.push_back(
          {held_step->identity, protocol::EncodeResultReply(held_step->decoded.request->id, ToWire(golden::Step()))});
    auto golden = AnswerGolden(in);
    out.insert(out.end(), golden.begin(), golden.end());
    return out;
  });
  Client client(Options(server, /*timeout_s=*/0.3));
  try {
    client.Step("env-1", protocol::SubmitAction{});
    FAIL() << "no TransportError";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("env.step"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not retried"), std::string::npos) << e.what();
  }
  // Stats is answered after the server has read everything sent before it on this connection,
  // so by then a re-sent step would have been counted. The late step reply is dropped.
  EXPECT_EQ(client.Stats(), GoldenResult("stats"));
  EXPECT_EQ(server.ops(), (std::vector<std::string>{"env.step", "stats"}));
  EXPECT_FALSE(client.Recv(0));
  EXPECT_EQ(client.stray_replies(), 0u) << "the late step reply is expected, not stray";
}

TEST(Client, HelloIsRetriedOnAFreshSocketWhenTheFirstAttemptGetsNoAnswer) {
  std::atomic<int> hellos{0};
  TestServer server([&](const TestServer::Incoming& in) {
    if (in.decoded.op == "hello" && hellos++ == 0) return std::vector<Outgoing>{};  // dropped
    return AnswerGolden(in);
  });
  Client client(Options(server, /*timeout_s=*/0.5));
  EXPECT_EQ(client.Hello(), golden::Hello());
  const std::vector<std::string> ops = server.ops();
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[0], "hello");
  EXPECT_EQ(ops[1], "hello");
  const std::vector<std::string> identities = server.identities();
  EXPECT_NE(identities[0], identities[1]) << "the retry must use a fresh socket";
  // The client keeps working on its new connection.
  EXPECT_EQ(client.Stats(), GoldenResult("stats"));
}

TEST(Client, HealthIsTypedAndRetriedLikeHello) {
  EXPECT_TRUE(IsIdempotent("health"));
  std::atomic<int> healths{0};
  TestServer server([&](const TestServer::Incoming& in) {
    if (in.decoded.op == "health" && healths++ == 0) return std::vector<Outgoing>{};  // dropped
    return AnswerGolden(in);
  });
  Client client(Options(server, /*timeout_s=*/0.5));
  EXPECT_EQ(client.Health(), golden::Health());
  EXPECT_EQ(server.ops(), (std::vector<std::string>{"health", "health"}));
  const std::vector<std::string> identities = server.identities();
  EXPECT_NE(identities[0], identities[1]) << "the retry must use a fresh socket";
}

TEST(Client, UnreachableServerIsATransportErrorAfterTheRetries) {
  std::string endpoint;
  {
    // A port that was free a moment ago and that nobody listens on now.
    zmq::context_t context;
    zmq::socket_t probe(context, zmq::socket_type::router);
    probe.set(zmq::sockopt::linger, 0);
    probe.bind("tcp://127.0.0.1:*");
    endpoint = probe.get(zmq::sockopt::last_endpoint);
  }
  ClientOptions options;
  options.endpoint = endpoint;
  options.request_timeout_s = 0.05;
  options.retries = 2;
  options.backoff_initial_s = 0.01;
  options.backoff_max_s = 0.02;
  Client client(options);
  try {
    client.Hello();
    FAIL() << "no TransportError";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("3 attempts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(endpoint), std::string::npos) << e.what();
  }
  EXPECT_THROW({ Client bad(ClientOptions{"not-an-endpoint"}); }, TransportError);
}

TEST(Client, MalformedRepliesAreClearErrorsAndTheClientKeepsWorking) {
  TestServer server([](const TestServer::Incoming& in) {
    const uint64_t id = in.decoded.request->id;
    if (in.decoded.op == "tasks.get") return std::vector<Outgoing>{{in.identity, "\xc1 not msgpack"}};
    if (in.decoded.op == "env.step") {
      json result = ToWire(golden::Step());
      result.erase("reward");
      return std::vector<Outgoing>{{in.identity, protocol::EncodeResultReply(id, result)}};
    }
    if (in.decoded.op == "env.reset") {  // an error code this client does not know
      std::string bytes = protocol::EncodeErrorReply(id, {protocol::ErrorCode::kInternal, "x", {}});
      bytes.replace(bytes.find("INTERNAL"), 8, "INTERNAX");
      return std::vector<Outgoing>{{in.identity, bytes}};
    }
    return AnswerGolden(in);
  });
  Client client(Options(server));
  try {
    client.GetTask("cpu/softmax_rows");
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
  }
  try {
    client.Step("env-1", protocol::SubmitAction{});
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("'reward'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("env.step"), std::string::npos) << e.what();
    EXPECT_GT(e.id(), 0u);
  }
  // Async: a reply that cannot be read still names its request when its id could be read.
  const uint64_t id = client.Send(protocol::EnvResetRequest{"env-1", std::nullopt});
  try {
    (void)client.Recv(30);
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.id(), id);
    EXPECT_NE(std::string(e.what()).find("env.reset"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("INTERNAX"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client.outstanding(), 0u);
  EXPECT_EQ(client.Hello(), golden::Hello());
}

}  // namespace
}  // namespace kernelgym::client
