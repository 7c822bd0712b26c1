// The runner pool without sockets: runners are identities that send encoded runner messages; what
// the scheduler sends back is captured. Time is passed in, so timeouts are tested without sleeping.
#include "env/server/scheduler.h"

#include <gtest/gtest.h>

#include "env/server/metrics.h"

namespace kernelgym::server {
namespace {

using namespace protocol::runner;

constexpr const char* kInstance = "0123456789ab";
constexpr const char* kDigest = "d1g35t";

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() {
    options_.runner_timeout_s = 3;
    options_.max_attempts = 3;
    options_.max_queued_jobs = 4;
    options_.no_runner_wait_s = 10;
    scheduler_ =
        std::make_unique<Scheduler>(options_, kInstance, [this](const std::string& identity, const std::string& bytes) {
          std::string problem;
          std::optional<ToRunner> message = DecodeToRunner(bytes, problem);
          ASSERT_TRUE(message.has_value()) << problem;
          sent_.push_back({identity, std::move(*message)});
        });
  }

  void Hello(const std::string& identity, const std::string& runner_id, std::vector<std::string> backends = {"cpu"},
             int slots = 1) {
    RunnerHello hello;
    hello.runner_id = runner_id;
    hello.backends = std::move(backends);
    for (const std::string& name : hello.backends) {
      hello.backend_info.push_back(BackendInfoOr(name));
      hello.backend_info.back().name = name;
    }
    hello.slots = slots;
    hello.pid = 1234;
    hello.fingerprint = {{"host", "test"}};
    scheduler_->OnRunnerMessage(identity, Encode(FromRunner{hello}), now_, done_);
  }
  void Heartbeat(const std::string& identity) {
    scheduler_->OnRunnerMessage(identity, Encode(FromRunner{protocol::runner::Heartbeat{1}}), now_, done_);
  }
  // A result as a runner sends it: naming the job by its id, this scheduler's instance and the
  // job's task digest, unless told otherwise.
  void Result(const std::string& identity, uint64_t job_id, Status status = Status::kOk,
              const std::string& instance = kInstance, const std::string& digest = kDigest,
              const std::string& task = "cpu/t") {
    JobDone done;
    done.job_id = job_id;
    done.instance = instance;
    done.task_digest = digest;
    done.result.status = status;
    done.result.task_id = task;
    scheduler_->OnRunnerMessage(identity, Encode(FromRunner{done}), now_, done_);
  }
  bool Submit(uint64_t id, const std::string& backend = "cpu") {
    Job job;
    job.job_id = id;
    job.backend = backend;
    job.task = "cpu/t";
    job.task_digest = kDigest;
    job.source = "src";
    return scheduler_->Submit(job, now_);
  }
  // The jobs sent to `identity` so far, in order.
  std::vector<uint64_t> JobsSentTo(const std::string& identity) const {
    std::vector<uint64_t> ids;
    for (const auto& [who, message] : sent_)
      if (who == identity)
        if (const Job* job = std::get_if<Job>(&message)) ids.push_back(job->job_id);
    return ids;
  }
  template <typename T>
  int CountSent(const std::string& identity) const {
    int n = 0;
    for (const auto& [who, message] : sent_) n += who == identity && std::holds_alternative<T>(message);
    return n;
  }
  void Advance(double seconds) {
    now_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  SchedulerOptions options_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::pair<std::string, ToRunner>> sent_;
  std::vector<JobOutcome> done_;
  Clock::time_point now_ = Clock::now();
};

TEST_F(SchedulerTest, AJobWaitsForARunnerAndRunsWhenOneJoins) {
  ASSERT_TRUE(Submit(1));
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(scheduler_->queued(), 1u);
  Hello("A", "runner-a");
  EXPECT_EQ(CountSent<Welcome>("A"), 1);
  EXPECT_EQ(JobsSentTo("A"), std::vector<uint64_t>{1});
  EXPECT_EQ(scheduler_->running(), 1u);
  Result("A", 1);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].job_id, 1u);
  EXPECT_EQ(done_[0].runner, "runner-a");
  EXPECT_EQ(done_[0].attempts, 1);
  EXPECT_EQ(done_[0].result.status, Status::kOk);
  EXPECT_EQ(scheduler_->running(), 0u);
}

TEST_F(SchedulerTest, SlotsBoundConcurrencyAndBackendsRoute) {
  Hello("A", "runner-a", {"cpu"}, 1);
  Hello("B", "runner-b", {"pallas"}, 2);
  ASSERT_TRUE(Submit(1));
  ASSERT_TRUE(Submit(2));
  ASSERT_TRUE(Submit(3, "pallas"));
  ASSERT_TRUE(Submit(4, "pallas"));
  EXPECT_EQ(JobsSentTo("A"), std::vector<uint64_t>{1});  // one slot: job 2 waits
  EXPECT_EQ(JobsSentTo("B"), (std::vector<uint64_t>{3, 4}));
  Result("A", 1);
  EXPECT_EQ(JobsSentTo("A"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(scheduler_->Backends(), (std::vector<std::string>{"cpu", "pallas"}));
}

TEST_F(SchedulerTest, ASilentRunnerIsDroppedAndItsJobRunsElsewhere) {
  Hello("A", "runner-a");
  ASSERT_TRUE(Submit(1));
  EXPECT_EQ(JobsSentTo("A"), std::vector<uint64_t>{1});
  Hello("B", "runner-b");
  Advance(2);
  Heartbeat("B");
  Advance(2);  // A silent for 4 s > 3 s; B for 2 s
  Heartbeat("B");
  scheduler_->Tick(now_, done_);
  EXPECT_EQ(scheduler_->runner_count(), 1u);
  EXPECT_EQ(JobsSentTo("B"), std::vector<uint64_t>{1});
  EXPECT_TRUE(done_.empty());
  Result("B", 1);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].attempts, 2);
  EXPECT_EQ(done_[0].runner, "runner-b");
}

TEST_F(SchedulerTest, AJobLostThreeTimesCompletesAsRunnerLost) {
  ASSERT_TRUE(Submit(1));
  for (int i = 0; i < 3; ++i) {
    const std::string id = "R" + std::to_string(i);
    Hello(id, "runner-" + std::to_string(i));
    EXPECT_EQ(JobsSentTo(id), std::vector<uint64_t>{1});
    Advance(4);
    scheduler_->Tick(now_, done_);
  }
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].result.status, Status::kInternalError);
  EXPECT_EQ(done_[0].result.message.rfind("RUNNER_LOST", 0), 0u) << done_[0].result.message;
  EXPECT_EQ(done_[0].attempts, 3);
}

TEST_F(SchedulerTest, AJobWithNoRunnerCompletesAsNoRunnerAfterTheWait) {
  ASSERT_TRUE(Submit(1, "cuda"));
  Advance(5);
  scheduler_->Tick(now_, done_);
  EXPECT_TRUE(done_.empty());
  Advance(6);
  scheduler_->Tick(now_, done_);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].result.message.rfind("NO_RUNNER", 0), 0u) << done_[0].result.message;
}

TEST_F(SchedulerTest, AFullQueueRefusesWithARetryHint) {
  for (uint64_t i = 1; i <= 4; ++i) ASSERT_TRUE(Submit(i));
  EXPECT_FALSE(Submit(5));
  EXPECT_GT(scheduler_->RetryAfterSeconds("cpu"), 0);
}

TEST_F(SchedulerTest, AnUnknownRunnerIsAskedToRegisterAndItsResultIsKept) {
  ASSERT_TRUE(Submit(1));
  Hello("A", "runner-a");
  // The same job answered by a connection the scheduler does not know (e.g. the runner's old
  // socket): the answer is taken, and the runner is asked to introduce itself.
  Result("X", 1);
  EXPECT_EQ(CountSent<Reregister>("X"), 1);
  ASSERT_EQ(done_.size(), 1u);
  Heartbeat("Y");
  EXPECT_EQ(CountSent<Reregister>("Y"), 1);
  Heartbeat("A");
  EXPECT_EQ(CountSent<Ack>("A"), 1);
  // A's slot was freed by the completion: a new job goes there.
  ASSERT_TRUE(Submit(2));
  EXPECT_EQ(JobsSentTo("A"), (std::vector<uint64_t>{1, 2}));
}

TEST_F(SchedulerTest, ACancelledJobIsNeverDispatchedOrReported) {
  ASSERT_TRUE(Submit(1));
  scheduler_->Cancel(1);
  Hello("A", "runner-a");
  EXPECT_TRUE(JobsSentTo("A").empty());
  ASSERT_TRUE(Submit(2));
  scheduler_->Cancel(2);  // running: its answer is dropped
  Result("A", 2);
  EXPECT_TRUE(done_.empty());
}

TEST_F(SchedulerTest, ARunnerReconnectingUnderANewIdentityReplacesItsOldOne) {
  Hello("A", "runner-a");
  ASSERT_TRUE(Submit(1));
  Hello("A2", "runner-a");  // same runner id, new connection
  EXPECT_EQ(scheduler_->runner_count(), 1u);
  EXPECT_EQ(JobsSentTo("A2"), std::vector<uint64_t>{1});  // re-queued to the new connection
}

TEST_F(SchedulerTest, EveryJobCarriesTheInstance) {
  Hello("A", "runner-a");
  ASSERT_TRUE(Submit(1));
  ASSERT_EQ(sent_.size(), 2u);  // welcome, job
  EXPECT_EQ(std::get<Job>(sent_.back().second).instance, kInstance);
}

// Job ids restart at 1 in every server process: a result is credited only when its instance,
// id and task digest are its job's. Anything else is dropped and counted, and the job keeps
// waiting for its own answer.
TEST_F(SchedulerTest, AResultNamingAnotherInstanceOrTaskIsNeverCredited) {
  Hello("A", "runner-a");
  ASSERT_TRUE(Submit(1));
  Result("A", 1, Status::kCompileError, "ba9876543210");  // a job 1 of an earlier server process
  Result("X", 1, Status::kCompileError, "ba9876543210");  // the same, from an unknown connection
  Result("A", 1, Status::kCompileError, kInstance, "other-digest");
  Result("A", 1, Status::kCompileError, kInstance, kDigest, "cpu/other_task");
  Result("A", 7, Status::kCompileError);  // no such job
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(scheduler_->running(), 1u);  // A's slot is still job 1's
  const nlohmann::json stale = scheduler_->Stats(now_)["stale_results"];
  EXPECT_EQ(stale["other_instance"], 2);
  EXPECT_EQ(stale["task_mismatch"], 2);
  EXPECT_EQ(stale["no_such_job"], 1);
  Result("A", 1);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].result.status, Status::kOk);
}

// Runners that fall silent one after another: the job goes to a runner heard from within the
// live window, never to one that is going silent, and a runner that froze before the job could
// reach it does not count against the job.
TEST_F(SchedulerTest, AJobIsReDispatchedOnlyToLiveRunners) {
  options_.heartbeat_interval_s = 0.5;  // live window 1.5 s; runners dropped after 3 s
  scheduler_ =
      std::make_unique<Scheduler>(options_, kInstance, [this](const std::string& identity, const std::string& bytes) {
        std::string problem;
        std::optional<ToRunner> message = DecodeToRunner(bytes, problem);
        ASSERT_TRUE(message.has_value()) << problem;
        sent_.push_back({identity, std::move(*message)});
      });
  // Ties between idle runners go to the first identity: the victims (V*) before Z.
  for (const char* id : {"V1", "V2", "V3", "Z"}) Hello(id, std::string("runner-") + id);
  // V1 falls silent at 0 s, V2 at 1 s, V3 at 2 s; Z heartbeats throughout.
  auto heartbeats = [&](double seconds, std::vector<std::string> alive) {
    for (int i = 0; i < static_cast<int>(seconds / 0.5); ++i) {
      Advance(0.5);
      for (const std::string& a : alive) Heartbeat(a);
      scheduler_->Tick(now_, done_);
    }
  };
  heartbeats(1, {"V2", "V3", "Z"});
  heartbeats(1, {"V3", "Z"});
  ASSERT_TRUE(Submit(1));  // at 2 s: V1 silent 2 s (not live), V2 1 s (live: it gets the job)
  EXPECT_TRUE(JobsSentTo("V1").empty());
  EXPECT_EQ(JobsSentTo("V2"), std::vector<uint64_t>{1});
  heartbeats(6, {"Z"});
  EXPECT_EQ(scheduler_->runner_count(), 1u);  // the three victims were dropped
  EXPECT_TRUE(JobsSentTo("V3").empty());      // silent 2 s when V2 was dropped
  EXPECT_EQ(JobsSentTo("Z"), std::vector<uint64_t>{1});
  ASSERT_TRUE(done_.empty()) << done_[0].result.message;
  Result("Z", 1);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].result.status, Status::kOk);
  EXPECT_EQ(scheduler_->Stats(now_)["lost"], 0);
}

// The Prometheus text (metrics.h) is the stats tree rendered: counters, gauges and the job
// latency histogram, with labels.
TEST_F(SchedulerTest, MetricsRenderTheCountersInThePrometheusFormat) {
  Hello("A", "runner-a", {"cpu"}, 2);
  ASSERT_TRUE(Submit(1));
  ASSERT_TRUE(Submit(2));
  Advance(0.3);
  Result("A", 1);
  Result("A", 2, Status::kCompileError);
  Result("A", 2, Status::kOk, "ba9876543210");
  ASSERT_TRUE(Submit(3));
  const std::string text = PrometheusText({{"scheduler", scheduler_->Stats(now_)}, {"sessions", 5}});
  for (const char* line :
       {"kernelgym_up 1\n", "kernelgym_sessions 5\n", "kernelgym_running_jobs 1\n",
        "kernelgym_runners{backend=\"cpu\"} 1\n", "kernelgym_runner_slots{backend=\"cpu\"} 2\n",
        "kernelgym_jobs_total{status=\"ok\"} 1\n", "kernelgym_jobs_total{status=\"compile_error\"} 1\n",
        "kernelgym_stale_results_total{reason=\"other_instance\"} 1\n", "kernelgym_job_seconds_bucket{le=\"0.25\"} 0\n",
        "kernelgym_job_seconds_bucket{le=\"0.5\"} 2\n", "kernelgym_job_seconds_bucket{le=\"+Inf\"} 2\n",
        "kernelgym_job_seconds_count 2\n", "# TYPE kernelgym_job_seconds histogram\n"})
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
  EXPECT_NE(HttpResponse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", text).find("200 OK"), std::string::npos);
  EXPECT_NE(HttpResponse("GET /secrets HTTP/1.1\r\n\r\n", text).find("404"), std::string::npos);
}

TEST_F(SchedulerTest, GarbageFromARunnerIsIgnored) {
  Hello("A", "runner-a");
  scheduler_->OnRunnerMessage("A", std::string("\xc1\xff garbage", 10), now_, done_);
  scheduler_->OnRunnerMessage("A", "", now_, done_);
  EXPECT_EQ(scheduler_->runner_count(), 1u);
  EXPECT_TRUE(done_.empty());
}

}  // namespace
}  // namespace kernelgym::server
