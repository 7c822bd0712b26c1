#include "env/server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "env/episode/episode.h"

namespace kernelgym::server {
namespace {

using namespace protocol::runner;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, std::string instance, SendFn send)
    : options_(options), instance_(std::move(instance)), send_(std::move(send)) {}

double Scheduler::LiveWindowSeconds() const {
  // Runners heartbeat every interval even while they evaluate (the host thread is not the
  // worker's): three intervals missed is a runner in trouble, long before runner_timeout_s.
  return std::min(options_.runner_timeout_s, 3 * options_.heartbeat_interval_s);
}

void Scheduler::Send(const std::string& identity, const ToRunner& message) { send_(identity, Encode(message)); }

bool Scheduler::Submit(Job job, Clock::time_point now) {
  std::deque<uint64_t>& queue = queues_[job.backend];
  if (queue.size() >= options_.max_queued_jobs) return false;
  const uint64_t id = job.job_id;
  job.instance = instance_;
  queue.push_back(id);
  JobState& state = jobs_[id];
  state.job = std::move(job);
  state.queued_since = state.submitted_at = now;
  Dispatch(now);
  return true;
}

void Scheduler::Cancel(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  if (it->second.runner_identity.empty()) {  // still queued: drop it now
    std::deque<uint64_t>& queue = queues_[it->second.job.backend];
    queue.erase(std::remove(queue.begin(), queue.end(), job_id), queue.end());
    jobs_.erase(it);
  } else {
    it->second.cancelled = true;  // the runner's answer will be discarded
  }
}

void Scheduler::Dispatch(Clock::time_point now) {
  const double live_window_s = LiveWindowSeconds();
  for (auto& [backend, queue] : queues_) {
    while (!queue.empty()) {
      // The least busy live runner with a free slot that serves this backend.
      Runner* best = nullptr;
      for (auto& [identity, runner] : runners_) {
        const auto& b = runner.hello.backends;
        if (std::find(b.begin(), b.end(), backend) == b.end()) continue;
        if (Seconds(now - runner.last_seen) > live_window_s) continue;
        if (static_cast<int>(runner.jobs.size()) >= runner.hello.slots) continue;
        if (!best || runner.jobs.size() < best->jobs.size()) best = &runner;
      }
      if (!best) break;
      const uint64_t id = queue.front();
      queue.pop_front();
      JobState& state = jobs_.at(id);
      state.runner_identity = best->identity;
      state.dispatched_at = now;
      ++state.attempts;
      best->jobs.insert(id);
      Send(best->identity, state.job);
    }
  }
}

bool Scheduler::Credible(const JobDone& done, std::string& why) const {
  if (done.instance != instance_) {
    why = "other_instance";  // a job of an earlier server process (or of another server)
    return false;
  }
  auto it = jobs_.find(done.job_id);
  if (it == jobs_.end()) {
    why = "no_such_job";  // answered already (by the runner it was re-queued to), or never ours
    return false;
  }
  const Job& job = it->second.job;
  // The digest is echoed from the job; the result's own task (set by the backend that judged it)
  // must be the job's too when it names one.
  if (done.task_digest != job.task_digest || (!done.result.task_id.empty() && done.result.task_id != job.task)) {
    why = "task_mismatch";
    return false;
  }
  return true;
}

void Scheduler::Complete(uint64_t job_id, EvalResult result, const std::string& runner_id,
                         std::vector<JobOutcome>& done, Clock::time_point now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  const double seconds = Seconds(now - it->second.submitted_at);
  if (job_seconds_counts_.empty()) job_seconds_counts_.assign(std::size(kJobSecondsBuckets) + 1, 0);
  ++job_seconds_counts_[std::lower_bound(std::begin(kJobSecondsBuckets), std::end(kJobSecondsBuckets), seconds) -
                        std::begin(kJobSecondsBuckets)];
  job_seconds_sum_ += seconds;
  ++completed_by_status_[std::string(StatusName(result.status))];
  // Detach it from wherever it is now: a queue (it was re-queued) or a runner's slot.
  if (it->second.runner_identity.empty()) {
    std::deque<uint64_t>& queue = queues_[it->second.job.backend];
    queue.erase(std::remove(queue.begin(), queue.end(), job_id), queue.end());
  } else if (auto runner = runners_.find(it->second.runner_identity); runner != runners_.end()) {
    runner->second.jobs.erase(job_id);
  }
  const bool cancelled = it->second.cancelled;
  const int attempts = it->second.attempts;
  jobs_.erase(it);
  ++completed_;
  if (!cancelled) done.push_back(JobOutcome{job_id, std::move(result), runner_id, attempts});
}

void Scheduler::OnRunnerMessage(const std::string& identity, std::string_view bytes, Clock::time_point now,
                                std::vector<JobOutcome>& done) {
  std::string problem;
  std::optional<FromRunner> message = DecodeFromRunner(bytes, problem);
  if (!message) {
    spdlog::warn("runner message refused: {}", problem);
    return;
  }
  auto known = runners_.find(identity);
  if (auto* hello = std::get_if<RunnerHello>(&*message)) {
    if (hello->v != kRunnerProtocolVersion) {
      spdlog::warn("runner {} speaks runner protocol {}, this server {}: ignored", hello->runner_id, hello->v,
                   kRunnerProtocolVersion);
      return;
    }
    // The same runner on a new connection (it lost the server and reconnected): its old
    // connection's jobs will never be answered.
    for (auto it = runners_.begin(); it != runners_.end();) {
      auto next = std::next(it);
      if (it->first != identity && it->second.hello.runner_id == hello->runner_id)
        DropRunner(it->first, "reconnected", now, done);
      it = next;
    }
    Runner& runner = runners_[identity];
    const bool rejoined = !runner.identity.empty();
    runner.identity = identity;
    runner.hello = *hello;
    runner.hello.slots = std::max(1, hello->slots);
    runner.last_seen = now;
    spdlog::info("runner {} {} (backends: {}, slots {}, pid {})", hello->runner_id, rejoined ? "re-registered" : "joined",
                 fmt::join(hello->backends, ","), runner.hello.slots, hello->pid);
    Send(identity, Welcome{options_.heartbeat_interval_s});
    Dispatch(now);
    return;
  }
  std::string why;
  if (auto* result = std::get_if<JobDone>(&*message); result && !Credible(*result, why)) {
    ++stale_results_[why];
    spdlog::warn("result for job {} of instance {} (task {}) dropped: {}", result->job_id, result->instance,
                 result->result.task_id, why);
    if (known == runners_.end())
      Send(identity, Reregister{});
    else
      known->second.last_seen = now;
    return;
  }
  if (known == runners_.end()) {
    // A heartbeat or result from a runner this server does not know (this server dropped it as
    // silent, or it has not said hello yet): ask it to introduce itself. A result it carries is
    // still good — Credible() says the job is one of ours, waiting for it.
    if (auto* result = std::get_if<JobDone>(&*message))
      Complete(result->job_id, std::move(result->result), "", done, now);
    Send(identity, Reregister{});
    return;
  }
  Runner& runner = known->second;
  runner.last_seen = now;
  if (std::holds_alternative<Heartbeat>(*message)) {
    Send(identity, Ack{});
    return;
  }
  auto& result = std::get<JobDone>(*message);
  runner.jobs.erase(result.job_id);
  ++runner.completed;
  mean_job_seconds_ = 0.9 * mean_job_seconds_ + 0.1 * std::max(0.0, result.result.seconds);
  // A job re-queued from a runner thought dead may come back from it after all: the first
  // answer wins, wherever the job is now (Complete detaches it).
  Complete(result.job_id, std::move(result.result), runner.hello.runner_id, done, now);
  Dispatch(now);
}

void Scheduler::DropRunner(const std::string& identity, const std::string& why, Clock::time_point now,
                           std::vector<JobOutcome>& done) {
  auto it = runners_.find(identity);
  if (it == runners_.end()) return;
  ++dropped_runners_;
  const std::string runner_id = it->second.hello.runner_id;
  const Clock::time_point last_seen = it->second.last_seen;
  spdlog::warn("runner {} dropped ({}); re-queueing {} job(s)", runner_id, why, it->second.jobs.size());
  // Re-queued at the front, in their original order: they have waited longest.
  std::vector<uint64_t> jobs(it->second.jobs.begin(), it->second.jobs.end());
  runners_.erase(it);
  for (auto j = jobs.rbegin(); j != jobs.rend(); ++j) {
    auto job = jobs_.find(*j);
    if (job == jobs_.end()) continue;
    JobState& state = job->second;
    state.runner_identity.clear();
    if (state.cancelled) {
      jobs_.erase(job);
      continue;
    }
    // A runner that fell silent before the job could reach it did not lose it: only a runner
    // heard from after the dispatch counts against the job.
    // (A job sent in answer to the runner's own message, its hello or a result, was sent to a
    // runner alive at that moment: hence >=.)
    if (last_seen >= state.dispatched_at) ++state.lost;
    if (state.lost >= options_.max_attempts || state.attempts >= 4 * options_.max_attempts) {
      ++lost_;
      Complete(*j,
               EnvironmentFailure(state.job.task, state.job.backend, "RUNNER_LOST",
                                  "the runner evaluating this step was lost " + std::to_string(state.lost) +
                                      " time(s) in " + std::to_string(state.attempts) +
                                      " dispatch(es) (last: " + runner_id + ", " + why + ")"),
               runner_id, done, now);
      continue;
    }
    ++requeued_;
    state.queued_since = now;
    queues_[state.job.backend].push_front(*j);
  }
  Dispatch(now);
}

void Scheduler::Tick(Clock::time_point now, std::vector<JobOutcome>& done) {
  std::vector<std::string> silent;
  for (const auto& [identity, runner] : runners_)
    if (Seconds(now - runner.last_seen) > options_.runner_timeout_s) silent.push_back(identity);
  for (const std::string& identity : silent)
    DropRunner(identity, "no heartbeat for " + std::to_string(options_.runner_timeout_s) + " s", now, done);

  const std::vector<std::string> served = Backends();
  for (auto& [backend, queue] : queues_) {
    if (std::find(served.begin(), served.end(), backend) != served.end()) continue;
    for (auto it = queue.begin(); it != queue.end();) {
      JobState& state = jobs_.at(*it);
      if (Seconds(now - state.queued_since) < options_.no_runner_wait_s) {
        ++it;
        continue;
      }
      const uint64_t id = *it;
      it = queue.erase(it);
      Complete(id,
               EnvironmentFailure(state.job.task, backend, "NO_RUNNER",
                                  "no runner for backend '" + backend + "' connected within " +
                                      std::to_string(options_.no_runner_wait_s) + " s"),
               "", done, now);
    }
  }
  Dispatch(now);
}

std::optional<BackendInfo> Scheduler::Descriptor(const std::string& backend) const {
  for (const auto& [identity, runner] : runners_)
    for (const BackendInfo& info : runner.hello.backend_info)
      if (info.name == backend) return info;
  return std::nullopt;
}

std::vector<std::string> Scheduler::Backends() const {
  std::set<std::string> names;
  for (const auto& [identity, runner] : runners_)
    for (const std::string& b : runner.hello.backends) names.insert(b);
  return {names.begin(), names.end()};
}

std::size_t Scheduler::queued() const {
  std::size_t n = 0;
  for (const auto& [backend, queue] : queues_) n += queue.size();
  return n;
}

std::size_t Scheduler::running() const {
  std::size_t n = 0;
  for (const auto& [identity, runner] : runners_) n += runner.jobs.size();
  return n;
}

double Scheduler::RetryAfterSeconds(const std::string& backend) const {
  int slots = 0;
  for (const auto& [identity, runner] : runners_) {
    const auto& b = runner.hello.backends;
    if (std::find(b.begin(), b.end(), backend) != b.end()) slots += runner.hello.slots;
  }
  auto q = queues_.find(backend);
  const double waiting = q == queues_.end() ? 0 : static_cast<double>(q->second.size());
  return std::clamp(mean_job_seconds_ * (1 + waiting / std::max(1, slots)) * 0.1, 0.1, 60.0);
}

nlohmann::json Scheduler::RunnerFingerprint(const std::string& runner_id) const {
  for (const auto& [identity, runner] : runners_)
    if (runner.hello.runner_id == runner_id) {
      nlohmann::json j = runner.hello.fingerprint;
      j["runner_id"] = runner_id;
      return j;
    }
  return nlohmann::json::object();
}

nlohmann::json Scheduler::Stats(Clock::time_point now) const {
  nlohmann::json runners = nlohmann::json::array();
  for (const auto& [identity, r] : runners_)
    runners.push_back({{"id", r.hello.runner_id},
                       {"pid", r.hello.pid},
                       {"backends", r.hello.backends},
                       {"slots", r.hello.slots},
                       {"busy", r.jobs.size()},
                       {"completed", r.completed},
                       {"last_seen_s", Seconds(now - r.last_seen)},
                       {"fingerprint", r.hello.fingerprint}});
  // Cumulative, as Prometheus histograms are: bucket i counts the jobs that took <= bound i.
  nlohmann::json buckets = nlohmann::json::array();
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= std::size(kJobSecondsBuckets); ++i) {
    cumulative += job_seconds_counts_.empty() ? 0 : job_seconds_counts_[i];
    buckets.push_back(
        {{"le", i < std::size(kJobSecondsBuckets) ? nlohmann::json(kJobSecondsBuckets[i]) : nlohmann::json("+Inf")},
         {"count", cumulative}});
  }
  const nlohmann::json job_seconds = {{"buckets", buckets}, {"sum", job_seconds_sum_}, {"count", cumulative}};
  nlohmann::json queues = nlohmann::json::object();
  for (const auto& [backend, queue] : queues_) queues[backend] = queue.size();
  return {{"runners", runners},
          {"queued", queues},
          {"running", running()},
          {"requeued", requeued_},
          {"lost", lost_},
          {"dropped_runners", dropped_runners_},
          {"completed", completed_},
          {"mean_job_seconds", mean_job_seconds_},
          {"instance", instance_},
          {"stale_results", stale_results_},
          {"live_window_s", LiveWindowSeconds()},
          {"completed_by_status", completed_by_status_},
          {"job_seconds", job_seconds}};
}

}  // namespace kernelgym::server
