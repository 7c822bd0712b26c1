// The environment server end to end: a real `kernelgym serve` process, real runner processes,
// real ZeroMQ over tcp://127.0.0.1, the real C++ client. The `null` backend (in the server,
// answers at once) is used where the test is about the server rather than about evaluations.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <zmq.hpp>

#include "core/subprocess.h"
#include "datasets/trajectory/reader.h"
#include "env/client/client.h"
#include "env/client/group_scoring.h"
#include "env/protocol/codec.h"
#include "env/protocol/runner_messages.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

using client::Client;
using client::ClientOptions;
using client::ServerError;
using protocol::ErrorCode;

ClientOptions Options(const ServerProcess& server, double timeout_s = 120) {
  return ClientOptions{.endpoint = server.clients(), .request_timeout_s = timeout_s};
}

protocol::EnvMakeRequest MakeRequest(const std::string& task, const std::string& backend = "cpu", bool record = false) {
  protocol::EnvMakeRequest r;
  r.task = task;
  r.backend = backend;
  r.record = record;
  r.max_steps = 8;
  return r;
}

std::string Improved() { return ReadText(SourceDir() / "tests/honest/softmax_rows_avx2/kernel.cpp"); }

ErrorCode CodeOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const ServerError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no ServerError";
  return ErrorCode::kInternal;
}

TEST(ServerTest, AWholeEpisodeOnTheCpuBackend) {
  ServerProcess server({"--local-runners", "1"});
  Client c(Options(server));
  const protocol::HelloResult hello = c.Hello();
  EXPECT_EQ(hello.protocol, protocol::kVersion);
  EXPECT_FALSE(hello.feature_names.empty());

  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows"));
  const protocol::ResetResult reset = c.Reset(env.env, 7);
  EXPECT_EQ(reset.observation.status, "ok") << reset.observation.text;
  EXPECT_GT(reset.observation.speedup, 0);
  EXPECT_EQ(reset.observation.features.size(), hello.feature_names.size());

  const protocol::StepResult better = c.Step(env.env, protocol::ReplaceAction{Improved()});
  EXPECT_EQ(better.observation.status, "ok") << better.observation.text;
  EXPECT_GT(better.observation.speedup, reset.observation.speedup);
  EXPECT_GT(better.reward, 0);

  const protocol::StepResult broken =
      c.Step(env.env, protocol::EditAction{{{"extern \"C\" void kernel(", "extern \"C\" void kernel(nonsense "}}});
  EXPECT_EQ(broken.observation.status, "compile_error");
  EXPECT_LT(broken.reward, 0);
  EXPECT_NE(broken.observation.text.find("nonsense"), std::string::npos) << broken.observation.text;

  const protocol::StepResult same = c.Step(env.env, protocol::RevertAction{1});
  EXPECT_TRUE(same.observation.reused);

  const protocol::StepResult submit = c.Step(env.env, protocol::SubmitAction{});
  EXPECT_TRUE(submit.terminated);
  EXPECT_FALSE(submit.truncated);
  EXPECT_EQ(submit.observation.status, "ok");
  EXPECT_EQ(CodeOf([&] { c.Step(env.env, protocol::SubmitAction{}); }), ErrorCode::kEpisodeOver);
  c.Close(env.env);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(ServerTest, ErrorsNameTheOpAndKeepTheServerServing) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  EXPECT_EQ(CodeOf([&] { c.Make(MakeRequest("cpu/no_such_task")); }), ErrorCode::kUnknownTask);
  EXPECT_EQ(CodeOf([&] { c.Make(MakeRequest("cpu/softmax_rows", "no_such_backend")); }), ErrorCode::kUnknownBackend);
  protocol::EnvMakeRequest bad_reward = MakeRequest("cpu/softmax_rows", "null");
  bad_reward.reward = "no_such_reward";
  EXPECT_EQ(CodeOf([&] { c.Make(bad_reward); }), ErrorCode::kUnknownReward);
  bad_reward.reward = "fast_p";
  bad_reward.reward_config = {{"p", "fast"}};
  try {
    c.Make(bad_reward);
    ADD_FAILURE() << "a bad reward_config was accepted";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest);
    EXPECT_NE(std::string(e.what()).find("p"), std::string::npos) << e.what();
    EXPECT_EQ(e.details().at("op"), "env.make");
  }
  EXPECT_EQ(CodeOf([&] { c.Reset("env-nope"); }), ErrorCode::kUnknownEnv);
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  EXPECT_EQ(CodeOf([&] { c.Step(env.env, protocol::SubmitAction{}); }), ErrorCode::kEpisodeOver);  // not reset
  // A request over the size limit is refused by the client, unsent: past 64 MiB the server's
  // socket would close the connection and lose every reply queued on it.
  try {
    c.Step(env.env, protocol::ReplaceAction{std::string(65u << 20, 'x')});
    ADD_FAILURE() << "a 65 MiB request was sent";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("8388608-byte limit; nothing was sent"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.Hello().protocol, protocol::kVersion);
}

TEST(ServerTest, MalformedAndOversizedMessagesGetErrorReplies) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  zmq::context_t context;
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::rcvtimeo, 10000);
  raw.connect(server.clients());
  auto roundtrip = [&](const std::string& bytes) {
    raw.send(zmq::buffer(bytes));
    zmq::message_t reply;
    EXPECT_TRUE(raw.recv(reply).has_value()) << "no reply";
    return protocol::DecodeReply(reply.to_string_view());
  };
  // Not msgpack.
  protocol::DecodedReply garbage = roundtrip(std::string("\xc1\xc1\xc1 not msgpack", 15));
  ASSERT_TRUE(garbage.valid) << garbage.problem;
  EXPECT_FALSE(garbage.ok);
  EXPECT_EQ(garbage.error.code, ErrorCode::kBadRequest);
  // Oversized: 9 MiB of a valid request.
  protocol::Request big{protocol::kVersion, 77, protocol::TasksGetRequest{std::string(9u << 20, 'x')}};
  protocol::DecodedReply oversized = roundtrip(protocol::EncodeRequest(big));
  ASSERT_TRUE(oversized.valid);
  EXPECT_EQ(oversized.error.code, ErrorCode::kBadRequest);
  EXPECT_NE(oversized.error.message.find("limit"), std::string::npos) << oversized.error.message;
  // A wrong type in an action names the op and the field.
  protocol::Request step{protocol::kVersion, 78, protocol::EnvStepRequest{"env-x", protocol::ReplaceAction{"x"}}};
  std::string bytes = protocol::EncodeRequest(step);
  const std::string key = "source";
  const auto at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes[at + key.size()] = '\xc3';  // the value "x" (fixstr) becomes `true`; the string's byte follows
  bytes.erase(at + key.size() + 1, 1);
  protocol::DecodedReply typed = roundtrip(bytes);
  ASSERT_TRUE(typed.valid);
  EXPECT_EQ(typed.id, 78u);
  EXPECT_EQ(typed.error.code, ErrorCode::kBadRequest);
  EXPECT_NE(typed.error.message.find("source"), std::string::npos) << typed.error.message;
  EXPECT_EQ(typed.error.details.at("op"), "env.step");
  // Still serving.
  Client c(Options(server));
  EXPECT_EQ(c.Hello().protocol, protocol::kVersion);
}

TEST(ServerTest, PipelinedStepsFromSeveralClientsAreAllAnswered) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  constexpr int kClients = 4, kEnvsPerClient = 8, kSteps = 5;
  std::vector<std::thread> threads;
  std::atomic<int> answered{0}, wrong{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      Client c(Options(server, 30));
      std::vector<std::string> envs;
      for (int e = 0; e < kEnvsPerClient; ++e) envs.push_back(c.Make(MakeRequest("cpu/softmax_rows", "null")).env);
      for (const std::string& env : envs) c.Reset(env, 1);
      // Every env steps concurrently; each reply must answer its own request.
      for (int s = 1; s <= kSteps; ++s) {
        std::map<uint64_t, std::string> sent;
        for (const std::string& env : envs)
          sent[c.Send(protocol::EnvStepRequest{env, protocol::ReplaceAction{"// " + env + " step " + std::to_string(s)}})] =
              env;
        for (std::size_t i = 0; i < envs.size(); ++i) {
          std::optional<client::Reply> r = c.Recv(30);
          if (!r || !sent.count(r->id)) {
            ++wrong;
            continue;
          }
          const protocol::StepResult step = client::AsStepResult(*r);
          const bool mine = step.observation.source == "// " + sent[r->id] + " step " + std::to_string(s) &&
                            step.observation.step == s;
          mine ? ++answered : ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered.load(), kClients * kEnvsPerClient * kSteps);
}

TEST(ServerTest, AForkIsIndependentOfItsParent) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::EnvInfo parent = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  c.Reset(parent.env, 3);
  c.Step(parent.env, protocol::ReplaceAction{"// parent 1\n"});
  const protocol::EnvInfo child = c.Fork(parent.env);
  EXPECT_NE(child.env, parent.env);
  EXPECT_EQ(child.task, parent.task);
  const protocol::StepResult c2 = c.Step(child.env, protocol::ReplaceAction{"// child 2\n"});
  EXPECT_EQ(c2.observation.step, 2);
  const protocol::StepResult p2 = c.Step(parent.env, protocol::EditAction{{{"parent 1", "parent 2"}}});
  EXPECT_EQ(p2.observation.step, 2);
  EXPECT_EQ(p2.observation.source, "// parent 2\n");
  const protocol::StepResult c3 = c.Step(child.env, protocol::RevertAction{1});
  EXPECT_EQ(c3.observation.source, "// parent 1\n");  // the history before the fork is shared by value
  c.Close(child.env);
  EXPECT_EQ(c.Step(parent.env, protocol::RevertAction{2}).observation.source, "// parent 2\n");
}

// Group scoring (env/client/group_scoring.h): G candidates from one reset env, in one pass; the
// env itself is not stepped and every fork is closed. (python/tests/test_group.py shows the same on
// real cpu kernels, with the rewards' ordering.)
TEST(ServerTest, AGroupOfCandidatesIsScoredFromOneStateWithoutSteppingIt) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  c.Reset(env.env, 3);
  std::vector<protocol::Action> candidates;
  for (int i = 0; i < 5; ++i) candidates.push_back(protocol::ReplaceAction{"// candidate " + std::to_string(i) + "\n"});
  candidates.push_back(protocol::EditAction{{{"no such text", "x"}}});  // cannot apply: an invalid_action observation
  const std::vector<protocol::StepResult> scored = client::Score(c, env.env, candidates);
  ASSERT_EQ(scored.size(), candidates.size());
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(scored[i].observation.source, "// candidate " + std::to_string(i) + "\n");
    EXPECT_EQ(scored[i].observation.step, 1);
  }
  EXPECT_EQ(scored[5].observation.status, "invalid_action");
  EXPECT_EQ(c.Health().sessions, 1) << "every fork is closed";
  EXPECT_EQ(c.Step(env.env, protocol::ReplaceAction{"// mine\n"}).observation.step, 1) << "the env was not stepped";

  const std::vector<double> advantages = client::GroupRelativeAdvantages({1, 2, 3});
  EXPECT_NEAR(advantages[0], -std::sqrt(1.5), 1e-12);
  EXPECT_NEAR(advantages[1], 0, 1e-12);
  EXPECT_EQ(client::GroupRelativeAdvantages({2, 2}), (std::vector<double>{0, 0}));
}

// Up to `n` replies to earlier Send()s, by id (fewer when one does not come within 30 s).
std::map<uint64_t, client::Reply> RecvReplies(Client& c, int n) {
  std::map<uint64_t, client::Reply> replies;
  for (int i = 0; i < n; ++i) {
    std::optional<client::Reply> r = c.Recv(30);
    if (!r) break;
    replies.emplace(r->id, std::move(*r));
  }
  return replies;
}

// A patch is applied off the event loop (env/server/patch_workers.h): the env is busy until its
// step is answered, and other requests are served meanwhile.
TEST(ServerTest, APatchIsAppliedOffTheLoopAndItsEnvIsBusyMeanwhile) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  c.Reset(env.env, 3);
  c.Step(env.env, protocol::ReplaceAction{"int a = 0;\nint b = 0;\n"});
  // A model's diff with a wrong hunk header: recounted, applied by GNU patch on a worker thread.
  const uint64_t patch = c.Send(protocol::EnvStepRequest{
      env.env, protocol::PatchAction{"@@ -7,3 +7,3 @@\n-int b = 0;\n+int b = 1;\n"}, nlohmann::json::object()});
  const uint64_t second = c.Send(protocol::EnvStepRequest{env.env, protocol::SubmitAction{}, nlohmann::json::object()});
  const protocol::HealthResult health = c.Health();  // served while the patch is applied
  EXPECT_EQ(health.sessions, 1);
  const std::map<uint64_t, client::Reply> replies = RecvReplies(c, 2);
  ASSERT_EQ(replies.size(), 2u) << "a reply was lost";
  EXPECT_EQ(client::AsStepResult(replies.at(patch)).observation.source, "int a = 0;\nint b = 1;\n");
  ASSERT_FALSE(replies.at(second).ok);
  EXPECT_EQ(replies.at(second).error.code, ErrorCode::kEnvBusy);
  EXPECT_TRUE(c.Step(env.env, protocol::SubmitAction{}).terminated) << "the env is free again";

  // Closing an env while its patch is applied answers the step (UNKNOWN_ENV), never leaves it.
  const protocol::EnvInfo other = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  c.Reset(other.env, 3);
  const uint64_t orphan = c.Send(protocol::EnvStepRequest{
      other.env, protocol::PatchAction{"@@ -1 +1 @@\n-x\n+y\n"}, nlohmann::json::object()});
  const uint64_t close = c.Send(protocol::EnvCloseRequest{other.env});
  const std::map<uint64_t, client::Reply> after_close = RecvReplies(c, 2);
  ASSERT_EQ(after_close.size(), 2u) << "a reply was lost";
  EXPECT_TRUE(after_close.at(close).ok);
  EXPECT_FALSE(after_close.at(orphan).ok);
  EXPECT_EQ(after_close.at(orphan).error.code, ErrorCode::kUnknownEnv);
}

// The runner evaluating a step is killed with SIGKILL: the server notices the silence, re-queues
// the job on the restarted runner, and the step is answered with a real evaluation.
TEST(ServerTest, ARunnerKilledMidJobHasItsJobRequeued) {
  ServerProcess server({"--local-runners", "1", "--heartbeat", "0.1", "--runner-timeout", "1"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows"));
  c.Reset(env.env, 5);
  const uint64_t id = c.Send(protocol::EnvStepRequest{env.env, protocol::ReplaceAction{Improved()}});
  // Wait until the step is running on a runner, then kill that runner.
  int64_t runner_pid = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json stats = c.Stats();
        for (const auto& r : stats["scheduler"]["runners"])
          if (r["busy"].get<int>() > 0) runner_pid = r["pid"].get<int64_t>();
        return runner_pid > 0;
      },
      30));
  ASSERT_EQ(kill(static_cast<pid_t>(runner_pid), SIGKILL), 0);
  std::optional<client::Reply> reply = c.Recv(120);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->id, id);
  const protocol::StepResult step = client::AsStepResult(*reply);
  EXPECT_EQ(step.observation.status, "ok") << step.observation.text;
  EXPECT_EQ(step.info["attempts"], 2);
  const nlohmann::json stats = c.Stats();
  EXPECT_GE(stats["scheduler"]["requeued"].get<int>(), 1);
  EXPECT_GE(stats["local_runners"]["restarts"].get<int>(), 1);
}

TEST(ServerTest, ARunnerJoiningLateServesWaitingSteps) {
  ServerProcess server({"--local-runners", "0"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows"));  // cpu is known before any runner
  const uint64_t id = c.Send(protocol::EnvResetRequest{env.env, 11});
  EXPECT_FALSE(c.Recv(0.5).has_value());  // nobody can evaluate yet
  // The env is busy with its reset: another request on it is refused at once, not queued.
  EXPECT_EQ(CodeOf([&] { c.Step(env.env, protocol::SubmitAction{}); }), ErrorCode::kEnvBusy);
  EXPECT_EQ(c.Stats()["scheduler"]["queued"]["cpu"], 1);
  const pid_t runner = SpawnLogged({KERNELGYM_CLI, "runner", "--connect", server.runners()}, server.dir() / "runner.log");
  std::optional<client::Reply> reply = c.Recv(120);
  kill(runner, SIGTERM);
  waitpid(runner, nullptr, 0);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->id, id);
  EXPECT_EQ(client::AsResetResult(*reply).observation.status, "ok");
}

// SIGTERM with recorded episodes and a step in flight: the step is finished and answered, the
// store holds every answered reset and step, and the server exits 0.
TEST(ServerTest, SigtermFinishesInFlightStepsAndFlushesTheRecorder) {
  ServerProcess server({"--local-runners", "1"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "cpu", /*record=*/true));
  c.Reset(env.env, 9);
  c.Step(env.env, protocol::ReplaceAction{Improved()});
  // A correct new kernel (compiled, checked and timed: a second or more), not a compile error that
  // is answered in a blink: the step must be in flight (received, evaluating) when the signal
  // comes, and a poll of `stats` must be able to see it so.
  const uint64_t id =
      c.Send(protocol::EnvStepRequest{env.env, protocol::EditAction{{{"extern \"C\"", "// sigterm\nextern \"C\""}}}});
  ASSERT_TRUE(WaitFor([&] { return c.Stats()["pending"] == 1; }, 30));
  kill(server.pid(), SIGTERM);
  std::optional<client::Reply> reply = c.Recv(120);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->id, id);
  EXPECT_TRUE(reply->ok);
  EXPECT_EQ(server.Terminate(), 0);

  TrajectoryReader reader(server.store());
  ASSERT_TRUE(reader.ok()) << reader.error();
  int resets = 0, transitions = 0;
  for (nlohmann::json record; reader.Next(record);) {
    EXPECT_EQ(record["env"], env.env);
    EXPECT_EQ(record["task"], "cpu/softmax_rows");
    record["kind"] == "reset" ? ++resets : ++transitions;
  }
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(transitions, 2);
  EXPECT_EQ(reader.stats().torn, 0u);
  EXPECT_EQ(reader.stats().corrupt, 0u);
}

TEST(ServerTest, SessionsOfAVanishedClientAreReapedAfterTheIdleTimeout) {
  ServerProcess server({"--local-runners", "0", "--null-backend", "--idle-timeout", "1"});
  {
    Client gone(Options(server));
    for (int i = 0; i < 3; ++i) gone.Reset(gone.Make(MakeRequest("cpu/softmax_rows", "null")).env);
  }  // the client disconnects without closing its envs
  Client c(Options(server));
  EXPECT_EQ(c.Stats()["sessions"], 3);
  EXPECT_TRUE(WaitFor([&] { return c.Stats()["sessions"] == 0; }, 10));
}

// Every answered step of a recorded episode is in the store, even when the server is killed with
// SIGKILL right after the last reply: replies wait for their records to be durable.
TEST(ServerTest, SigkillLosesNoAnsweredStep) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null", /*record=*/true));
  c.Reset(env.env, 1);
  constexpr int kSteps = 7;  // max_steps is 8
  for (int i = 1; i <= kSteps; ++i) c.Step(env.env, protocol::ReplaceAction{"// v" + std::to_string(i) + "\n"});
  kill(server.pid(), SIGKILL);
  ASSERT_EQ(server.Terminate(10), 128 + SIGKILL);

  TrajectoryReader reader(server.store());
  std::set<int64_t> steps;
  for (nlohmann::json record; reader.Next(record);) steps.insert(record["step"].get<int64_t>());
  EXPECT_EQ(steps.size(), static_cast<std::size_t>(kSteps + 1));  // the reset (0) and every step
  EXPECT_EQ(reader.stats().corrupt, 0u);

  // The store exports as a standard tool reads it: one JSON object per transition.
  const auto out = server.dir() / "transitions.jsonl";
  SpawnOptions export_command;
  export_command.argv = {KERNELGYM_CLI, "dataset", "export", "--store", server.store().string(), "--format",
                         "transitions", "--out", out.string()};
  const ProcessResult exported = RunProcess(export_command, 60);
  ASSERT_TRUE(exported.ok()) << exported.Describe() << exported.stderr_text;
  std::istringstream lines(ReadText(out));
  int rows = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_EQ(row["task"], "cpu/softmax_rows");
    EXPECT_EQ(row["action_kind"], "replace");
  }
  EXPECT_EQ(rows, kSteps);
}

// A step's meta (e.g. an LLM policy's prompts and completions) is recorded with its transition,
// as sent; a step without one records none.
TEST(ServerTest, AStepsMetaIsRecordedWithItsTransition) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null", /*record=*/true));
  c.Reset(env.env, 1);
  const nlohmann::json meta = {{"policy", "llm-agent"},
                               {"exchanges", {{{"role", "implementer"}, {"completion", "```cpp\n// v1\n```"}}}}};
  c.Step(env.env, protocol::ReplaceAction{"// v1\n"}, meta);
  c.Step(env.env, protocol::ReplaceAction{"// v2\n"});
  ASSERT_EQ(server.Terminate(10), 0);

  TrajectoryReader reader(server.store());
  std::map<int64_t, nlohmann::json> transitions;
  for (nlohmann::json record; reader.Next(record);)
    if (record["kind"] == "transition") transitions[record["step"].get<int64_t>()] = record;
  ASSERT_EQ(transitions.size(), 2u);
  EXPECT_EQ(transitions[1]["meta"], meta);
  EXPECT_FALSE(transitions[2].contains("meta"));
}

// The knobs action through the server: valid values produce the template with their defines;
// an out-of-domain value is an invalid_action observation naming the knob.
TEST(ServerTest, KnobsActionsAreValidatedAgainstTheTemplate) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::TaskInfo task = c.GetTask("cpu/softmax_rows");
  ASSERT_TRUE(task.knobs.count("SIMD"));
  const protocol::EnvInfo env = c.Make(MakeRequest("cpu/softmax_rows", "null"));
  c.Reset(env.env, 1);
  const protocol::StepResult good = c.Step(env.env, protocol::KnobsAction{{{"SIMD", int64_t{1}}}});
  EXPECT_EQ(good.observation.status, "ok");
  EXPECT_NE(good.observation.source.find("#define SIMD 1"), std::string::npos) << good.observation.source;
  const protocol::StepResult bad = c.Step(env.env, protocol::KnobsAction{{{"SIMD", int64_t{7}}}});
  EXPECT_EQ(bad.observation.status, "invalid_action");
  EXPECT_NE(bad.observation.action_error.find("SIMD"), std::string::npos) << bad.observation.action_error;
  EXPECT_EQ(bad.observation.source, good.observation.source);  // unchanged
}

// A runner describes its backends in runner.hello, and the server's hello passes that on: a
// backend this server's build has never heard of reaches clients as its runner describes it.
TEST(ServerTest, HelloDescribesEachBackendAsItsRunnerDoes) {
  ServerProcess server({"--local-runners", "0"});
  zmq::context_t context;
  zmq::socket_t runner(context, zmq::socket_type::dealer);
  runner.set(zmq::sockopt::linger, 0);
  runner.connect(server.runners());
  protocol::runner::RunnerHello hello;
  hello.runner_id = "fake:1:1";
  hello.backends = {"toy"};
  BackendInfo toy;
  toy.name = "toy";
  toy.language = "toylang";
  toy.fence_tags = {"toy"};
  toy.source_file = "kernel.toy";
  toy.description = "a backend only its runner knows";
  hello.backend_info = {toy};
  runner.send(zmq::buffer(protocol::runner::Encode(protocol::runner::FromRunner{hello})));
  Client c(Options(server));
  protocol::HelloResult seen;
  ASSERT_TRUE(WaitFor([&] {
    seen = c.Hello();
    return std::find(seen.backends.begin(), seen.backends.end(), "toy") != seen.backends.end();
  }, 10));
  ASSERT_EQ(seen.backend_info.size(), seen.backends.size());
  const auto at = std::find(seen.backends.begin(), seen.backends.end(), "toy") - seen.backends.begin();
  EXPECT_EQ(seen.backend_info[at], toy);
}

// tasks.get is built from the tasks the server loaded: typed, with each backend's version and the
// tensors' shapes resolved at the timed sizes, so that a client needs no task file.
TEST(ServerTest, TasksGetDescribesEveryVersionOfATask) {
  ServerProcess server({"--local-runners", "0", "--null-backend"});
  Client c(Options(server));
  const protocol::TaskInfo task = c.GetTask("cpu/silu_mul");
  EXPECT_EQ(task.summary.backends, (std::vector<std::string>{"cpu", "pallas"}));
  ASSERT_EQ(task.versions.size(), 2u);
  EXPECT_NE(task.versions.at("cpu").reference_source.find("def reference"), std::string::npos);
  EXPECT_NE(task.versions.at("pallas").reference_source.find("jax"), std::string::npos);
  EXPECT_NE(task.versions.at("pallas").starter_source.find("pallas_call"), std::string::npos);
  EXPECT_FALSE(task.versions.at("pallas").size_sets.empty());
  EXPECT_FALSE(task.versions.at("cpu").compile_flags.empty());
  EXPECT_TRUE(task.versions.at("pallas").compile_flags.empty());
  ASSERT_FALSE(task.inputs.empty());
  ASSERT_FALSE(task.outputs.empty());
  for (const std::vector<protocol::TensorInfo>* tensors : {&task.inputs, &task.outputs})
    for (const protocol::TensorInfo& t : *tensors) {
      ASSERT_EQ(t.dims.size(), t.shape.size()) << t.name;
      for (std::size_t i = 0; i < t.dims.size(); ++i)
        if (task.sizes.count(t.dims[i])) EXPECT_EQ(t.shape[i], task.sizes.at(t.dims[i])) << t.name;
    }
  EXPECT_GT(task.outputs[0].atol + task.outputs[0].rtol, 0);
  const std::vector<protocol::TaskSummary> all = c.ListTasks();
  EXPECT_GE(all.size(), 60u);
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const protocol::TaskSummary& s) { return s.id == "cpu/silu_mul"; }), 1);
}

// Past the evaluation queue's bound, a request is refused at once with OVERLOADED and a retry
// hint, and the env is left as it was (it can be reset later).
TEST(ServerTest, AFullQueueAnswersOverloadedWithARetryHint) {
  ServerProcess server({"--local-runners", "0", "--max-queue", "1"});
  Client c(Options(server));
  const protocol::EnvInfo first = c.Make(MakeRequest("cpu/softmax_rows"));
  const protocol::EnvInfo second = c.Make(MakeRequest("cpu/softmax_rows"));
  c.Send(protocol::EnvResetRequest{first.env, 1});  // queued: no runner yet
  try {
    c.Reset(second.env, 1);
    ADD_FAILURE() << "a reset past the queue bound was accepted";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOverloaded);
    ASSERT_TRUE(e.details().count("retry_after_s"));
    EXPECT_GT(std::stod(e.details().at("retry_after_s")), 0);
  }
  EXPECT_EQ(CodeOf([&] { c.Step(second.env, protocol::SubmitAction{}); }), ErrorCode::kEpisodeOver);  // not reset
}

}  // namespace
}  // namespace kernelgym::testing
