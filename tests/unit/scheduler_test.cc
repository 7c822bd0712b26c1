// The runner pool without sockets: runners are identities that send encoded runner messages; what
// the scheduler sends back is captured. Time is passed in, so timeouts are tested without sleeping.
#include "env/server/scheduler.h"

#include <gtest/gtest.h>

namespace kernelgym::server {
namespace {

using namespace protocol::runner;

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() {
    options_.runner_timeout_s = 3;
    options_.max_attempts = 3;
    options_.max_queued_jobs = 4;
    options_.no_runner_wait_s = 10;
    scheduler_ = std::make_unique<Scheduler>(options_, [this](const std::string& identity, const std::string& bytes) {
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
  void Result(const std::string& identity, uint64_t job_id, Status status = Status::kOk) {
    JobDone done;
    done.job_id = job_id;
    done.result.status = status;
    done.result.task_id = "cpu/t";
    scheduler_->OnRunnerMessage(identity, Encode(FromRunner{done}), now_, done_);
  }
  bool Submit(uint64_t id, const std::string& backend = "cpu") {
    Job job;
    job.job_id = id;
    job.backend = backend;
    job.task = "cpu/t";
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

TEST_F(SchedulerTest, GarbageFromARunnerIsIgnored) {
  Hello("A", "runner-a");
  scheduler_->OnRunnerMessage("A", std::string("\xc1\xff garbage", 10), now_, done_);
  scheduler_->OnRunnerMessage("A", "", now_, done_);
  EXPECT_EQ(scheduler_->runner_count(), 1u);
  EXPECT_TRUE(done_.empty());
}

}  // namespace
}  // namespace kernelgym::server
