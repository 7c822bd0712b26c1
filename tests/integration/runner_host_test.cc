// The real `kernelgym runner` process against a ROUTER socket playing the server: hello,
// heartbeats during a job, results, refusals, reregister, SIGTERM mid-job, a server restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <optional>
#include <zmq.hpp>

#include "core/subprocess.h"
#include "env/protocol/runner_messages.h"
#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

namespace runner = protocol::runner;
using Clock = std::chrono::steady_clock;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The server side of the runner protocol, as far as these tests need it.
class FakeServer {
 public:
  struct Received {
    std::string identity;  // the runner's connection, as the ROUTER names it
    runner::FromRunner message;
  };

  FakeServer(zmq::context_t& context, const std::string& endpoint, bool ack_heartbeats)
      : socket_(context, zmq::socket_type::router), ack_heartbeats_(ack_heartbeats) {
    socket_.set(zmq::sockopt::linger, 0);
    // The port of a server that just closed may take a moment to be free again.
    const auto deadline = After(10);
    for (;;) {
      try {
        socket_.bind(endpoint);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || Clock::now() > deadline) throw;
        zmq_poll(nullptr, 0, 20);  // a short back-off before the next try
      }
    }
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }

  // The next message from the runner, or nullopt at the deadline. Heartbeats are acked (when
  // asked to) and returned like everything else. `child`'s output is drained while waiting.
  std::optional<Received> Next(Clock::time_point deadline, ChildProcess& child) {
    while (Clock::now() < deadline) {
      child.DrainOutput();
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t identity, payload;
      (void)socket_.recv(identity);
      EXPECT_TRUE(identity.more());
      (void)socket_.recv(payload);
      EXPECT_FALSE(payload.more()) << "one protocol message is one frame";
      std::string problem;
      std::optional<runner::FromRunner> message = runner::DecodeFromRunner(payload.to_string(), problem);
      EXPECT_TRUE(message) << problem;
      if (!message) continue;
      if (ack_heartbeats_ && std::holds_alternative<runner::Heartbeat>(*message))
        Send(identity.to_string(), runner::Ack{});
      return Received{identity.to_string(), std::move(*message)};
    }
    return std::nullopt;
  }

  // Skips heartbeats (and anything else) until a message of kind M.
  template <typename M>
  std::optional<std::pair<std::string, M>> Await(Clock::time_point deadline, ChildProcess& child) {
    while (std::optional<Received> r = Next(deadline, child))
      if (auto* m = std::get_if<M>(&r->message)) return std::make_pair(r->identity, std::move(*m));
    return std::nullopt;
  }

  void Send(const std::string& identity, const runner::ToRunner& message) {
    socket_.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(runner::Encode(message)));
  }

 private:
  zmq::socket_t socket_;
  bool ack_heartbeats_;
  std::string endpoint_;
};

// `suites`: the suites root the runner loads its tasks from (empty: the bundled ones).
ChildProcess StartRunner(const std::string& endpoint, const std::vector<std::string>& extra = {},
                         const std::filesystem::path& suites = {}) {
  SpawnOptions options;
  options.argv = {KERNELGYM_CLI, "runner", "--connect", endpoint, "--heartbeat-s", "0.1"};
  options.argv.insert(options.argv.end(), extra.begin(), extra.end());
  for (char** e = environ; *e; ++e)
    if (suites.empty() || std::string_view(*e).rfind("KERNELGYM_SUITES=", 0) != 0) options.env.push_back(*e);
  if (!suites.empty()) options.env.push_back("KERNELGYM_SUITES=" + suites.string());
  ChildProcess child = ChildProcess::Spawn(options);
  EXPECT_GT(child.pid(), 0) << child.error();
  return child;
}

runner::Job SoftmaxJob(uint64_t id) {
  runner::Job job;
  job.job_id = id;
  job.instance = "0123456789ab";
  job.backend = "cpu";
  job.task = "cpu/softmax_rows";
  job.task_digest = Tasks().Find(job.task)->digest;  // the copy in this source tree, like the runner's
  job.source = ReadText(SourceDir() / "datasets/suites/cpu/softmax_rows/starter.cpp");
  job.options.seeds = {101, 102, 103};  // the task's 3 trials (fewer: the runner draws the rest)
  job.options.timing_seed = 7;
  job.options.timing_budget_s = 0.3;
  return job;
}

class RunnerHostTest : public ::testing::Test {
 protected:
  // Starts the runner against a fresh server and answers its hello with a welcome.
  void Start(const std::vector<std::string>& extra = {}, const std::filesystem::path& suites = {}) {
    server_.emplace(context_, "tcp://127.0.0.1:*", /*ack_heartbeats=*/true);
    child_ = StartRunner(server_->endpoint(), extra, suites);
    auto hello = server_->Await<runner::RunnerHello>(After(30), child_);
    ASSERT_TRUE(hello) << "no hello; runner stderr:\n" << child_.stderr_text();
    identity_ = hello->first;
    hello_ = hello->second;
    // Each backend it serves, described as this build describes it (the server passes it on).
    EXPECT_EQ(hello_.backend_info.size(), hello_.backends.size());
    for (std::size_t i = 0; i < hello_.backend_info.size() && i < hello_.backends.size(); ++i)
      EXPECT_EQ(hello_.backend_info[i], *FindBackendInfo(hello_.backends[i]));
    server_->Send(identity_, runner::Welcome{0.1});
  }

  // The result of `job_id`, counting the heartbeats that said a job was in progress.
  std::optional<runner::JobDone> AwaitResult(uint64_t job_id, double timeout_s, int* busy_heartbeats = nullptr) {
    const auto deadline = After(timeout_s);
    while (std::optional<FakeServer::Received> r = server_->Next(deadline, child_)) {
      if (const auto* beat = std::get_if<runner::Heartbeat>(&r->message); beat && beat->busy > 0 && busy_heartbeats)
        ++*busy_heartbeats;
      if (auto* done = std::get_if<runner::JobDone>(&r->message)) {
        EXPECT_EQ(done->job_id, job_id);
        // The result names its job as the job named itself: the server instance and the digest.
        EXPECT_EQ(done->instance, "0123456789ab");
        EXPECT_FALSE(done->task_digest.empty());
        return std::move(*done);
      }
    }
    ADD_FAILURE() << "no result for job " << job_id << "; runner stderr:\n" << child_.stderr_text();
    return std::nullopt;
  }

  zmq::context_t context_;
  std::optional<FakeServer> server_;
  ChildProcess child_;  // killed (with its process group) when the test ends
  std::string identity_;
  runner::RunnerHello hello_;
};

TEST_F(RunnerHostTest, HelloAnnouncesBackendsFingerprintAndPid) {
  Start();
  EXPECT_EQ(hello_.v, runner::kRunnerProtocolVersion);
  EXPECT_EQ(hello_.backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(hello_.pid, child_.pid());
  EXPECT_EQ(hello_.slots, 1);
  EXPECT_NE(hello_.runner_id.find(":" + std::to_string(child_.pid()) + ":"), std::string::npos) << hello_.runner_id;
  for (const char* key : {"host", "cpu_model", "cores", "machine", "compiler", "kernel"})
    EXPECT_TRUE(hello_.fingerprint.count(key)) << key;
  EXPECT_GT(std::stoi(hello_.fingerprint.at("cores")), 0);
  EXPECT_NE(hello_.fingerprint.at("compiler").find("g++"), std::string::npos) << hello_.fingerprint.at("compiler");
}

TEST_F(RunnerHostTest, HeartbeatsFlowWhileAJobRunsAndTheResultIsOk) {
  Start();
  server_->Send(identity_, SoftmaxJob(1));
  const auto sent = Clock::now();
  int busy_heartbeats = 0;
  const std::optional<runner::JobDone> done = AwaitResult(1, 120, &busy_heartbeats);
  ASSERT_TRUE(done);
  const double job_seconds = SecondsSince(sent);
  EXPECT_EQ(done->result.status, Status::kOk) << done->result.message;
  EXPECT_EQ(done->result.task_id, "cpu/softmax_rows");
  ASSERT_TRUE(done->result.timing);
  EXPECT_FALSE(done->result.timing->samples.empty()) << "raw samples travel with the result";
  ASSERT_TRUE(done->result.correctness);
  // The server's seeds for the timed sizes; the check sets' trials are seeded from them.
  const std::vector<uint64_t>& seeds = done->result.correctness->seeds;
  ASSERT_GE(seeds.size(), 3u);
  EXPECT_EQ(std::vector<uint64_t>(seeds.begin(), seeds.begin() + 3), (std::vector<uint64_t>{101, 102, 103}))
      << "the server's seeds are used";
  EXPECT_TRUE(done->result.stage_seconds.count("timing_lock_wait"));
  // A 0.1 s interval over a job of ~0.7 s or more: several heartbeats, busy, before the result.
  EXPECT_GE(busy_heartbeats, 3) << "the job took " << job_seconds << " s";
  EXPECT_GE(busy_heartbeats, static_cast<int>(job_seconds / 0.1) / 2) << "the job took " << job_seconds << " s";
}

TEST_F(RunnerHostTest, JobsForUnknownTasksOrBackendsAreInternalErrors) {
  Start();
  runner::Job unknown_task = SoftmaxJob(5);
  unknown_task.task = "cpu/no_such_task";
  server_->Send(identity_, unknown_task);
  std::optional<runner::JobDone> done = AwaitResult(5, 10);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result.status, Status::kInternalError);
  EXPECT_NE(done->result.message.find("cpu/no_such_task"), std::string::npos) << done->result.message;

  runner::Job unknown_backend = SoftmaxJob(6);
  unknown_backend.backend = "cuda";
  server_->Send(identity_, unknown_backend);
  done = AwaitResult(6, 10);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result.status, Status::kInternalError);
  EXPECT_NE(done->result.message.find("'cuda'"), std::string::npos) << done->result.message;
  EXPECT_EQ(done->result.backend, "cuda");

  // And it keeps serving.
  server_->Send(identity_, runner::Reregister{});
  EXPECT_TRUE(server_->Await<runner::RunnerHello>(After(5), child_));
}

// Rule 1 of reward integrity with runners on other hosts: the job names its task by id and by
// the digest of the server's copy. Two runners get the same job: one holds the same copy and
// evaluates it; the other holds a copy whose tolerance is 5000 times looser (it would pass wrong
// kernels) and refuses it, naming both digests.
TEST_F(RunnerHostTest, ARunnerWithAnotherCopyOfTheTaskRefusesItsJobsNamingBothDigests) {
  runner::Job job = SoftmaxJob(21);
  job.options.run_timing = false;

  Start();
  server_->Send(identity_, job);
  std::optional<runner::JobDone> same = AwaitResult(21, 60);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->result.status, Status::kOk) << same->result.message;

  const std::filesystem::path suites = TestTempDir() / "suites_with_a_looser_copy";
  const std::filesystem::path copy = suites / "cpu" / "softmax_rows";
  std::filesystem::remove_all(suites);
  std::filesystem::create_directories(copy.parent_path());
  std::filesystem::copy(SourceDir() / "datasets/suites/cpu/softmax_rows", copy,
                        std::filesystem::copy_options::recursive);
  std::string task_json = ReadText(copy / "task.json");
  const std::string tolerance = "\"rtol\": 1e-4";
  ASSERT_NE(task_json.find(tolerance), std::string::npos);
  task_json.replace(task_json.find(tolerance), tolerance.size(), "\"rtol\": 0.5");
  std::ofstream(copy / "task.json") << task_json;
  const TaskRegistry other = TaskRegistry::LoadFrom(suites);
  ASSERT_NE(other.Find(job.task), nullptr);
  ASSERT_NE(other.Find(job.task)->digest, job.task_digest);

  Start({}, suites);
  server_->Send(identity_, job);
  std::optional<runner::JobDone> refused = AwaitResult(21, 20);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result.status, Status::kInternalError);
  const std::string& message = refused->result.message;
  EXPECT_NE(message.find("differs between the server"), std::string::npos) << message;
  EXPECT_NE(message.find(job.task_digest.substr(0, 16)), std::string::npos) << message;
  EXPECT_NE(message.find(other.Find(job.task)->digest.substr(0, 16)), std::string::npos) << message;
  EXPECT_FALSE(refused->result.correctness.has_value()) << "a refused job is not evaluated";
}

TEST_F(RunnerHostTest, ReregisterBringsASecondHello) {
  Start();
  server_->Send(identity_, runner::Reregister{});
  auto again = server_->Await<runner::RunnerHello>(After(5), child_);
  ASSERT_TRUE(again) << child_.stderr_text();
  EXPECT_EQ(again->second, hello_) << "the same runner says the same hello";
  EXPECT_EQ(again->first, identity_) << "on the same connection";
}

TEST_F(RunnerHostTest, SigtermMidJobStillDeliversTheResultAndExitsZero) {
  Start();
  server_->Send(identity_, SoftmaxJob(9));
  // A busy heartbeat: the job is in progress.
  for (;;) {
    auto beat = server_->Await<runner::Heartbeat>(After(30), child_);
    ASSERT_TRUE(beat) << child_.stderr_text();
    if (beat->second.busy > 0) break;
  }
  ASSERT_EQ(kill(child_.pid(), SIGTERM), 0);
  const std::optional<runner::JobDone> done = AwaitResult(9, 120);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result.status, Status::kOk) << done->result.message;
  ASSERT_TRUE(child_.Wait(After(20))) << "the runner did not exit after its last result";
  EXPECT_EQ(child_.exit_code(), 0) << child_.stderr_text();
  EXPECT_EQ(child_.signal(), 0);
  child_.DrainOutput();
  EXPECT_NE(child_.stderr_text().find("stopping: finishing 1 job(s) in progress"), std::string::npos)
      << "the signal did not arrive mid-job:\n"
      << child_.stderr_text();
}

TEST_F(RunnerHostTest, SigtermWhileIdleExitsZeroAtOnce) {
  Start();
  ASSERT_EQ(kill(child_.pid(), SIGTERM), 0);
  ASSERT_TRUE(child_.Wait(After(5)));
  EXPECT_EQ(child_.exit_code(), 0) << child_.stderr_text();
}

TEST_F(RunnerHostTest, AfterAServerRestartOnTheSamePortTheRunnerSaysHelloAgain) {
  constexpr double kSilence = 1.5;
  Start({"--server-silence-s", "1.5"});
  const std::string endpoint = server_->endpoint();  // tcp://127.0.0.1:<port>
  // Acked heartbeats: a server that answers is never left.
  EXPECT_FALSE(server_->Await<runner::RunnerHello>(After(2 * kSilence), child_))
      << "hello again while the server answered";
  server_.reset();
  const auto closed = Clock::now();
  // The new server knows nobody and answers nothing (a real one would say reregister): the
  // runner's heartbeats go unanswered until it reconnects on its own.
  server_.emplace(context_, endpoint, /*ack_heartbeats=*/false);
  auto hello = server_->Await<runner::RunnerHello>(After(kSilence + 5), child_);
  ASSERT_TRUE(hello) << child_.stderr_text();
  EXPECT_LT(SecondsSince(closed), kSilence + 2);
  EXPECT_EQ(hello->second.runner_id, hello_.runner_id);
  // It serves the new server.
  server_->Send(hello->first, runner::Welcome{0.1});
  runner::Job bad = SoftmaxJob(12);
  bad.task = "cpu/none";
  server_->Send(hello->first, bad);
  auto done = server_->Await<runner::JobDone>(After(10), child_);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->second.job_id, 12u);
}

}  // namespace
}  // namespace kernelgym::testing
