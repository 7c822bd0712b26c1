// The client ops: one handler each, the evaluations they start and the replies they send.
#include <dirent.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/backend_info.h"
#include "env/episode/observation.h"
#include "env/protocol/codec.h"
#include "env/server/server_loop.h"
#include "env/server/task_info.h"
#include "rewards/reward.h"

namespace kernelgym::server::detail {
namespace {

using nlohmann::json;
using protocol::Error;
using protocol::ErrorCode;

std::size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

int OpenFileDescriptors() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir)) ++n;
    closedir(dir);
    n -= 3;  // ".", "..", and the directory's own fd
  }
  return n;
}

// health's answer: cheap (probes call it every few seconds) and no more than a probe or a
// client-side router needs. The null backend is answered in process, so it has no runners.
// `null_on_runners`: null evaluations go to runners (serve --null-backend-runners), which then count.
protocol::HealthResult Health(bool draining, double uptime_s, std::size_t sessions, const Scheduler& scheduler,
                              bool null_on_runners) {
  protocol::HealthResult h;
  h.status = draining ? "draining" : "ok";
  h.uptime_s = uptime_s;
  h.sessions = sessions;
  const json stats = scheduler.Stats(Clock::now());  // named: a range-for over a temporary's member dangles
  for (const json& runner : stats.at("runners"))
    for (const json& backend : runner.at("backends")) {
      // A runner may serve `null` too, but the server never sends it a null job.
      const BackendInfo* info = FindBackendInfo(backend.get<std::string>());
      if (!(info && info->evaluated_by_server) || null_on_runners) ++h.runners[backend.get<std::string>()];
    }
  h.queued = scheduler.queued();
  h.running = scheduler.running();
  return h;
}

}  // namespace

void ServerLoop::Handle(const std::string& client, const protocol::Request& request) {
  const uint64_t id = request.id;
  const std::string op(protocol::OpName(request.body));
  if (draining_ && op != "hello" && op != "stats" && op != "health" && op != "env.close") {
    return ReplyError(client, id, ErrorCode::kOverloaded, op, op + ": the server is shutting down",
                      {{"retry_after_s", "5"}, {"reason", "shutting_down"}});
  }
  std::visit(
      [&](const auto& body) {
        using B = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<B, protocol::HelloRequest>) Hello(client, id);
        else if constexpr (std::is_same_v<B, protocol::TasksListRequest>) {
          json list = json::array();
          for (const Task* task : tasks_.InSuite(body.suite)) list.push_back(task_info_.at(task->id).summary);
          ReplyResult(client, id, {{"tasks", list}});
        } else if constexpr (std::is_same_v<B, protocol::TasksGetRequest>) {
          const auto info = task_info_.find(body.task);
          if (info == task_info_.end())
            return ReplyError(client, id, ErrorCode::kUnknownTask, op, op + ": no task '" + body.task + "'",
                              {{"task", body.task}});
          ReplyResult(client, id, info->second.details);
        } else if constexpr (std::is_same_v<B, protocol::EnvMakeRequest>) Make(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvResetRequest>) Reset(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvStepRequest>) Step(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvForkRequest>) Fork(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvCloseRequest>) Close(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::HealthRequest>) {
          const double uptime_s = Seconds(Clock::now() - started_);
          protocol::HealthResult health =
              Health(draining_, uptime_s, sessions_.size(), scheduler_, options_.null_backend_on_runners);
          health.instance = instance_;
          ReplyResult(client, id, protocol::ToWire(health));
        } else ReplyResult(client, id, Stats());
      },
      request.body);
}

void ServerLoop::Hello(const std::string& client, uint64_t id) {
  protocol::HelloResult hello;
  hello.server = std::string("kernelgym ") + KERNELGYM_VERSION;
  hello.instance = instance_;
  hello.backends = scheduler_.Backends();
  // `null` only as the server's own (a runner serving it is never sent a null job).
  std::erase_if(hello.backends, [&](const std::string& name) {
    const BackendInfo* info = FindBackendInfo(name);
    return info && info->evaluated_by_server && !options_.null_backend_on_runners;
  });
  if (options_.null_backend)
    for (const BackendInfo& info : KnownBackends())
      if (info.evaluated_by_server &&
          std::find(hello.backends.begin(), hello.backends.end(), info.name) == hello.backends.end())
        hello.backends.push_back(info.name);
  // Each backend as its runners describe it (runner.hello); the server's own `null` as this build
  // does; a backend described by neither as C++ (BackendInfoOr).
  for (const std::string& name : hello.backends) {
    hello.backend_info.push_back(scheduler_.Descriptor(name).value_or(BackendInfoOr(name)));
    hello.backend_info.back().name = name;
  }
  hello.rewards = RewardRegistry::Global().Names();
  hello.action_kinds = {"replace", "edit", "patch", "knobs", "revert", "submit"};
  hello.feature_names = FeatureNames();
  hello.default_max_steps = options_.default_max_steps;
  hello.default_time_budget_s = options_.default_time_budget_s;
  hello.max_message_bytes = protocol::kMaxMessageBytes;
  SendToClient(client, protocol::EncodeHelloReply(id, hello));
}

void ServerLoop::Make(const std::string& client, uint64_t id, const protocol::EnvMakeRequest& r) {
  const std::string op = "env.make";
  const Task* task = tasks_.Find(r.task);
  if (!task) return ReplyError(client, id, ErrorCode::kUnknownTask, op, op + ": no task '" + r.task + "'", {{"task", r.task}});
  const std::vector<std::string> connected = scheduler_.Backends();
  const auto& known = options_.known_backends;
  const BackendInfo* described = FindBackendInfo(r.backend);
  // A backend the server answers itself (`null`) only with --null-backend: whatever a runner or
  // --backends says, its evaluations would never leave this process.
  const bool in_process = described && described->evaluated_by_server;
  const bool backend_ok = in_process ? options_.null_backend || options_.null_backend_on_runners
                                     : std::find(known.begin(), known.end(), r.backend) != known.end() ||
                                           std::find(connected.begin(), connected.end(), r.backend) != connected.end();
  if (!backend_ok)
    return ReplyError(client, id, ErrorCode::kUnknownBackend, op, op + ": no backend '" + r.backend + "'",
                      {{"backend", r.backend}});
  if (!task->Supports(r.backend))
    return ReplyError(client, id, ErrorCode::kBadRequest, op,
                      op + ": task '" + r.task + "' has no version for backend '" + r.backend + "'",
                      {{"task", r.task}, {"backend", r.backend}, {"field", "backend"}});
  const std::vector<std::string> rewards = RewardRegistry::Global().Names();
  if (std::find(rewards.begin(), rewards.end(), r.reward) == rewards.end())
    return ReplyError(client, id, ErrorCode::kUnknownReward, op, op + ": no reward '" + r.reward + "'",
                      {{"reward", r.reward}});
  std::string error;
  std::shared_ptr<const Reward> reward = RewardRegistry::Global().Create(r.reward, r.reward_config, error);
  if (!reward)
    return ReplyError(client, id, ErrorCode::kBadRequest, op, op + ": reward_config: " + error, {{"field", "reward_config"}});
  if (r.max_steps > options_.max_steps_limit)
    return ReplyError(client, id, ErrorCode::kBadRequest, op,
                      op + ": field 'max_steps' is above this server's limit of " + std::to_string(options_.max_steps_limit),
                      {{"field", "max_steps"}});
  if (r.record && !EnsureRecorder(error))
    return ReplyError(client, id, ErrorCode::kInternal, op, op + ": cannot record: " + error, {{"field", "record"}});
  if (sessions_.size() >= options_.max_sessions)
    return ReplyError(client, id, ErrorCode::kOverloaded, op,
                      op + ": this server holds its maximum of " + std::to_string(options_.max_sessions) + " envs",
                      {{"retry_after_s", "10"}});
  if (const auto refusal = quotas_.AdmitSession(principal_)) return ReplyQuota(client, id, op, *refusal);
  if (RefuseForMemory(client, id, op)) return;

  EpisodeLimits limits;
  limits.max_steps = r.max_steps > 0 ? r.max_steps : options_.default_max_steps;
  limits.time_budget_s = r.time_budget_s > 0 ? r.time_budget_s : options_.default_time_budget_s;
  // Tasks live as long as the registry (the whole run): a non-owning shared_ptr.
  std::shared_ptr<const Task> task_ptr(std::shared_ptr<const Task>{}, task);
  std::string env = NewId(("env-" + instance_ + "-").c_str());
  Session& session = sessions_[env];
  session.episode = std::make_unique<Episode>(task_ptr, r.backend, r.reward, std::move(reward), limits);
  session.record = r.record;
  session.last_active = Clock::now();
  session.principal = principal_;
  quotas_.SessionOpened(principal_);

  protocol::EnvInfo info{env,
                         task->id,
                         r.backend,
                         r.reward,
                         session.episode->reward().range().min,
                         session.episode->reward().range().max,
                         limits.max_steps,
                         limits.time_budget_s,
                         r.record,
                         instance_};
  ReplyResult(client, id, protocol::ToWire(info));
}

Session* ServerLoop::FindEnv(const std::string& client, uint64_t id, const std::string& op, const std::string& env,
                             bool must_be_idle) {
  auto it = sessions_.find(env);
  if (it == sessions_.end()) {
    if (const std::optional<std::string> made_by = InstanceOfEnv(env); made_by && *made_by != instance_) {
      ReplyError(client, id, ErrorCode::kServerRestarted, op,
                 op + ": env '" + env + "' was made by server instance " + *made_by +
                     ", which is gone: this server (instance " + instance_ +
                     ") started since, and an env does not outlive its server; make a new env",
                 {{"env", env}, {"instance", instance_}});
      return nullptr;
    }
    ReplyError(client, id, ErrorCode::kUnknownEnv, op, op + ": no env '" + env + "' (closed, reaped or never made)",
               {{"env", env}});
    return nullptr;
  }
  it->second.last_active = Clock::now();
  if (must_be_idle && it->second.episode->pending()) {
    ReplyError(client, id, ErrorCode::kEnvBusy, op, op + ": env '" + env + "' has a reset or step in flight; wait for its reply",
               {{"env", env}});
    return nullptr;
  }
  return &it->second;
}

void ServerLoop::Reset(const std::string& client, uint64_t id, const protocol::EnvResetRequest& r) {
  Session* session = FindEnv(client, id, "env.reset", r.env, true);
  if (!session) return;
  if (const auto refusal = quotas_.AdmitEvaluation(principal_, Clock::now()))
    return ReplyQuota(client, id, "env.reset", *refusal);
  // Drawn seeds stay below 2^53, so that every JSON reader of the trajectory store (pandas,
  // JavaScript) holds them exactly.
  const uint64_t seed = r.seed ? *r.seed : rng_() & ((uint64_t{1} << 53) - 1);
  const EvaluationRequest request = session->episode->Reset(seed);
  session->episode_id = NewId("ep-");
  ++resets_;
  Evaluate(*session, request, Pending{r.env, client, id, std::nullopt, "", nullptr, principal_}, "env.reset");
}

void ServerLoop::Step(const std::string& client, uint64_t id, const protocol::EnvStepRequest& r) {
  Session* session = FindEnv(client, id, "env.step", r.env, true);
  if (!session) return;
  if (const auto refusal = quotas_.AdmitEvaluation(principal_, Clock::now()))
    return ReplyQuota(client, id, "env.step", *refusal);
  if (RefuseForMemory(client, id, "env.step")) return;
  Episode& episode = *session->episode;
  if (!episode.active())
    return ReplyError(client, id, ErrorCode::kEpisodeOver, "env.step",
                      std::string("env.step: env '") + r.env + "' " +
                          (episode.was_reset() ? "has terminated or been truncated" : "has not been reset") +
                          "; call env.reset",
                      {{"env", r.env}});
  Pending pending{r.env, client, id, r.action, episode.last_text(), r.meta, principal_};
  ++steps_;
  if (const auto* patch = std::get_if<protocol::PatchAction>(&r.action)) {
    // GNU patch is a child process: off the loop (patch_workers.h). The env is busy until then.
    episode.BeginStep();
    const uint64_t token = next_patch_token_++;
    patch_workers_.Submit(token, episode.current_source(), patch->diff);
    patching_.emplace(token, std::move(pending));
    return;
  }
  Episode::Plan plan = episode.PlanStep(r.action);
  if (!plan.evaluation) return Finish(pending, nullptr, "");
  Evaluate(*session, *plan.evaluation, std::move(pending), "env.step");
}

bool ServerLoop::Evaluate(Session& session, const EvaluationRequest& request, Pending pending, const std::string& op) {
  Episode& episode = *session.episode;
  // The server's own `null` backend answers at once with the null result (core/result.h), so that
  // benchmarks measure the server (decode, session, observation, reward, encode) and nothing else.
  if (const BackendInfo* info = FindBackendInfo(episode.backend());
      info && info->evaluated_by_server && !options_.null_backend_on_runners) {
    const EvalResult result = NullBackendResult(episode.task_id());
    Finish(pending, &result, "null");
    return true;
  }
  protocol::runner::Job job;
  job.job_id = next_job_id_++;
  job.backend = episode.backend();
  job.task = episode.task_id();
  job.task_digest = episode.task().digest;
  job.source = request.source;
  job.options.seeds = request.seeds;
  job.options.timing_seed = request.timing_seed;
  job.options.timing_budget_s = request.timing_budget_s;  // the episode decides how strict (a submit is stricter)
  job.options.min_rounds = request.min_rounds;
  job.options.target_relative_ci = request.target_relative_ci;
  const uint64_t job_id = job.job_id;
  if (!scheduler_.Submit(std::move(job), Clock::now())) {
    episode.Abandon();
    const double retry = scheduler_.RetryAfterSeconds(episode.backend());
    ReplyError(pending.client, pending.request_id, ErrorCode::kOverloaded, op,
               op + ": the evaluation queue for backend '" + episode.backend() + "' is full",
               {{"retry_after_s", std::to_string(retry)}, {"env", pending.env}});
    return false;
  }
  session.job_id = job_id;
  quotas_.EvaluationStarted(pending.principal);
  pending.counted = true;
  pending_.emplace(job_id, std::move(pending));
  return true;
}

RecordContext ServerLoop::RecordContextFor(const Session& session, const std::string& env,
                                           const std::string& runner) const {
  RecordContext c;
  c.env = env;
  c.episode = session.episode_id;
  c.task = session.episode->task_id();
  c.backend = session.episode->backend();
  c.seed = session.episode->seed();
  c.runner = scheduler_.RunnerFingerprint(runner);
  return c;
}

void ServerLoop::Finish(const Pending& pending, const EvalResult* result, const std::string& runner, int attempts) {
  auto it = sessions_.find(pending.env);
  if (it == sessions_.end()) return;  // closed meanwhile
  Session& session = it->second;
  session.job_id = 0;
  Episode& episode = *session.episode;
  std::optional<std::string> record;
  if (!pending.action) {
    protocol::ResetResult reset = episode.FinishReset(*result, runner);
    reset.info["attempts"] = attempts;
    if (session.record) record = ResetRecord(RecordContextFor(session, pending.env, runner), reset, result);
    Deliver(pending.client, protocol::EncodeReply(pending.request_id, reset), std::move(record));
    return;
  }
  protocol::StepResult step = episode.FinishStep(result, runner);
  step.info["attempts"] = attempts;
  if (session.record)
    record = TransitionRecord(RecordContextFor(session, pending.env, runner), *pending.action, pending.prompt, pending.meta, step, result);
  Deliver(pending.client, protocol::EncodeReply(pending.request_id, step), std::move(record));
}

void ServerLoop::OnPatchesApplied() {
  for (PatchWorkers::Done& done : patch_workers_.TakeDone()) {
    auto it = patching_.find(done.token);
    if (it == patching_.end()) continue;
    Pending pending = std::move(it->second);
    patching_.erase(it);
    auto session = sessions_.find(pending.env);
    if (session == sessions_.end()) continue;  // closed meanwhile: as for an evaluation (Finish)
    Episode::Plan plan = session->second.episode->PlanStep(*pending.action, std::move(done.outcome));
    if (!plan.evaluation) {
      Finish(pending, nullptr, "");
      continue;
    }
    Evaluate(session->second, *plan.evaluation, std::move(pending), "env.step");
  }
}

void ServerLoop::OnJobDone(JobOutcome outcome) {
  auto it = pending_.find(outcome.job_id);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  Uncount(pending, outcome.result.seconds);
  Finish(pending, &outcome.result, outcome.runner, outcome.attempts);
}

void ServerLoop::FailPending(uint64_t job_id, const Pending& pending, ErrorCode code, const std::string& message) {
  scheduler_.Cancel(job_id);
  Uncount(pending, 0);
  auto it = sessions_.find(pending.env);
  if (it != sessions_.end()) {
    it->second.episode->Abandon();
    it->second.job_id = 0;
  }
  ReplyError(pending.client, pending.request_id, code, pending.action ? "env.step" : "env.reset", message,
             {{"env", pending.env}});
}

bool ServerLoop::RefuseForMemory(const std::string& client, uint64_t id, const std::string& op) {
  if (options_.max_heap_bytes == 0 || heap_bytes_ < options_.max_heap_bytes) return false;
  ++refused_for_memory_;
  ReplyError(client, id, ErrorCode::kOverloaded, op,
             op + ": the server holds " + std::to_string(heap_bytes_ >> 20) + " MiB, its bound (--max-heap-bytes) is " +
                 std::to_string(options_.max_heap_bytes >> 20) + " MiB: close envs",
             {{"retry_after_s", "5"}, {"reason", "memory"}});
  return true;
}

void ServerLoop::ReplyQuota(const std::string& client, uint64_t id, const std::string& op, const QuotaRefusal& refusal) {
  char retry[32];
  std::snprintf(retry, sizeof retry, "%.3f", refusal.retry_after_s);
  ReplyError(client, id, ErrorCode::kOverloaded, op, op + ": over the " + refusal.quota + " quota: " + refusal.message,
             {{"retry_after_s", retry}, {"reason", "quota"}, {"quota", refusal.quota}});
}

void ServerLoop::Uncount(const Pending& pending, double seconds) {
  if (pending.counted) quotas_.EvaluationFinished(pending.principal, seconds, Clock::now());
}

void ServerLoop::Fork(const std::string& client, uint64_t id, const protocol::EnvForkRequest& r) {
  Session* parent = FindEnv(client, id, "env.fork", r.env, true);
  if (!parent) return;
  if (sessions_.size() >= options_.max_sessions)
    return ReplyError(client, id, ErrorCode::kOverloaded, "env.fork", "env.fork: this server holds its maximum of envs",
                      {{"retry_after_s", "10"}});
  if (const auto refusal = quotas_.AdmitSession(principal_)) return ReplyQuota(client, id, "env.fork", *refusal);
  if (RefuseForMemory(client, id, "env.fork")) return;
  Session child;
  child.principal = principal_;
  quotas_.SessionOpened(principal_);
  child.episode = parent->episode->Fork();
  child.record = parent->record;
  child.episode_id = parent->episode_id.empty() ? "" : NewId("ep-");
  child.last_active = Clock::now();
  const Episode& e = *child.episode;
  std::string env = NewId(("env-" + instance_ + "-").c_str());
  protocol::EnvInfo info{env,
                         e.task_id(),
                         e.backend(),
                         e.reward_name(),
                         e.reward().range().min,
                         e.reward().range().max,
                         e.limits().max_steps,
                         e.limits().time_budget_s,
                         child.record,
                         instance_};
  sessions_.emplace(env, std::move(child));
  json wire = protocol::ToWire(info);
  ReplyResult(client, id, wire);
}

void ServerLoop::Close(const std::string& client, uint64_t id, const protocol::EnvCloseRequest& r) {
  Session* session = FindEnv(client, id, "env.close", r.env, false);
  if (!session) return;
  if (session->job_id) {
    scheduler_.Cancel(session->job_id);
    auto pending = pending_.find(session->job_id);
    if (pending != pending_.end()) {
      ReplyError(pending->second.client, pending->second.request_id, ErrorCode::kUnknownEnv,
                 pending->second.action ? "env.step" : "env.reset", "the env was closed before its evaluation finished",
                 {{"env", r.env}});
      Uncount(pending->second, 0);
      pending_.erase(pending);
    }
  }
  // A step whose patch is still being applied is answered the same way, not left without a reply.
  for (auto it = patching_.begin(); it != patching_.end();) {
    if (it->second.env != r.env) {
      ++it;
      continue;
    }
    ReplyError(it->second.client, it->second.request_id, ErrorCode::kUnknownEnv, "env.step",
               "the env was closed before its step finished", {{"env", r.env}});
    it = patching_.erase(it);
  }
  quotas_.SessionClosed(session->principal);
  sessions_.erase(r.env);
  ++closed_since_trim_;
  ReplyResult(client, id, json::object());
}

json ServerLoop::Stats() {
  const auto now = Clock::now();
  std::size_t session_bytes = 0;
  for (const auto& [env, session] : sessions_) session_bytes += session.episode->ApproximateBytes();
  const std::size_t heap = HeapBytes();
  json recorder = nullptr;
  if (recorder_) {
    const RecorderStats r = recorder_->stats();
    recorder = {{"records_written", r.records_written}, {"bytes_written", r.bytes_written}, {"batches", r.batches},
                {"segments", r.segments}, {"failed", r.failed}, {"queued", r.queued}, {"healthy", r.healthy},
                {"last_error", r.last_error}, {"segment", r.segment.string()}};
  }
  json local = nullptr;
  if (local_runners_) local = {{"pids", local_runners_->pids()}, {"restarts", local_runners_->restarts()}};
  return {{"instance", instance_},
          {"uptime_s", Seconds(now - started_)},
          {"sessions", sessions_.size()},
          {"session_bytes", session_bytes},
          {"memory",
           {{"heap_bytes", heap},
            {"heap_bytes_at_start", heap_bytes_at_start_},
            {"heap_bytes_per_session",
             sessions_.empty() ? 0.0
                               : static_cast<double>(heap > heap_bytes_at_start_ ? heap - heap_bytes_at_start_ : 0) /
                                     static_cast<double>(sessions_.size())},
            {"max_heap_bytes", options_.max_heap_bytes},
            {"refused", refused_for_memory_}}},
          {"pending", pending_.size()},
          {"held_for_recorder", held_replies_.size()},
          {"resets", resets_},
          {"steps", steps_},
          {"requests", requests_by_op_},
          {"errors", errors_by_code_},
          {"undeliverable_replies", undeliverable_},
          {"client_outboxes", outboxes_.size()},
          {"client_outbox_bytes", outbox_bytes_},
          {"rss_bytes", ResidentBytes()},
          {"open_fds", OpenFileDescriptors()},
          {"draining", draining_},
          {"scheduler", scheduler_.Stats(now)},
          {"local_runners", local},
          {"quotas", quotas_.Stats()},
          {"auth",
           {{"curve", curve_},
            {"handshakes_accepted", zap_ ? zap_->accepted() : 0},
            {"handshakes_refused", zap_ ? zap_->refused() : 0}}},
          {"recorder", recorder}};
}

}  // namespace kernelgym::server::detail
