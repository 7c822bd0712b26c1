#include "env/server/server.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "datasets/suite.h"
#include "datasets/trajectory/recorder.h"
#include "env/episode/episode.h"
#include "env/episode/observation.h"
#include "env/protocol/codec.h"
#include "env/server/local_runners.h"
#include "env/server/records.h"
#include "env/server/task_info.h"
#include "rewards/reward.h"

namespace kernelgym::server {
namespace {

using nlohmann::json;
using protocol::Error;
using protocol::ErrorCode;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The in-process `null` backend: answers at once with a neutral result, so that benchmarks
// measure the server (decode, session, observation, reward, encode) and nothing else.
EvalResult NullResult(const Task& task) {
  EvalResult r;
  r.task_id = task.id;
  r.backend = "null";
  r.status = Status::kOk;
  r.stage = Stage::kDone;
  r.message = "null backend: not compiled or run";
  TimingReport timing;
  timing.speedup = timing.speedup_ci_low = timing.speedup_ci_high = 1.0;
  timing.converged = true;
  r.timing = timing;
  return r;
}

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

struct Session {
  std::unique_ptr<Episode> episode;
  Clock::time_point last_active;
  bool record = false;
  std::string episode_id;   // unique per reset (the trajectory store groups by it)
  uint64_t job_id = 0;      // the evaluation in flight, 0 when none
};

// A reset or step waiting for its evaluation.
struct Pending {
  std::string env;
  std::string client;       // ZeroMQ identity of the client that asked
  uint64_t request_id = 0;
  std::optional<protocol::Action> action;  // empty for a reset
  std::string prompt;       // the observation the action was chosen from (recorded)
};

class ServerLoop {
 public:
  ServerLoop(const ServerOptions& options, zmq::context_t& context)
      : options_(options),
        clients_(context, zmq::socket_type::router),
        runners_(context, zmq::socket_type::router),
        scheduler_(options.scheduler,
                   [this](const std::string& identity, const std::string& bytes) { SendToRunner(identity, bytes); }),
        rng_(std::random_device{}()) {}

  int Run(const std::atomic<bool>& stop);

 private:
  // ---- transport ----
  void SendTo(zmq::socket_t& socket, const std::string& identity, const std::string& bytes);
  void SendToRunner(const std::string& identity, const std::string& bytes) { SendTo(runners_, identity, bytes); }
  void ReplyError(const std::string& client, uint64_t id, ErrorCode code, const std::string& op, std::string message,
                  std::map<std::string, std::string> details = {});
  void ReplyResult(const std::string& client, uint64_t id, const json& result) {
    SendTo(clients_, client, protocol::EncodeResultReply(id, result));
  }
  // Sends a reset/step reply, after its record is durable when the env records.
  void Deliver(const std::string& client, std::string reply, std::optional<std::string> record);

  // ---- requests ----
  void OnClientMessage(const std::string& client, std::string_view bytes);
  void Handle(const std::string& client, const protocol::Request& request);
  void Hello(const std::string& client, uint64_t id);
  void Make(const std::string& client, uint64_t id, const protocol::EnvMakeRequest& r);
  void Reset(const std::string& client, uint64_t id, const protocol::EnvResetRequest& r);
  void Step(const std::string& client, uint64_t id, const protocol::EnvStepRequest& r);
  void Fork(const std::string& client, uint64_t id, const protocol::EnvForkRequest& r);
  void Close(const std::string& client, uint64_t id, const protocol::EnvCloseRequest& r);
  json Stats();
  // The env named by a request, or an error reply (UNKNOWN_ENV / ENV_BUSY) and nullptr.
  Session* FindEnv(const std::string& client, uint64_t id, const std::string& op, const std::string& env,
                   bool must_be_idle);

  // ---- evaluations ----
  // Starts the evaluation of a reset or step. False (and an OVERLOADED reply) when the queue is full.
  bool Evaluate(Session& session, const EvaluationRequest& request, Pending pending, const std::string& op);
  void OnJobDone(JobOutcome outcome);
  // `attempts`: how many runners the evaluation was sent to (more than 1 after a runner was lost).
  void Finish(const Pending& pending, const EvalResult* result, const std::string& runner, int attempts = 0);
  void FailPending(uint64_t job_id, const Pending& pending, ErrorCode code, const std::string& message);
  RecordContext RecordContextFor(const Session& session, const std::string& env, const std::string& runner) const;

  bool EnsureRecorder(std::string& error);
  void DeliverDurable();
  void Tick(Clock::time_point now);
  std::string NewId(const char* prefix);

  const ServerOptions& options_;
  zmq::socket_t clients_, runners_;
  Scheduler scheduler_;
  TaskRegistry tasks_;
  std::unique_ptr<LocalRunners> local_runners_;
  std::unique_ptr<TrajectoryRecorder> recorder_;
  std::mt19937_64 rng_;

  std::unordered_map<std::string, Session> sessions_;
  std::unordered_map<uint64_t, Pending> pending_;  // by job id
  uint64_t next_job_id_ = 1;
  // Replies held until their records are durable, by recorder token.
  std::unordered_map<uint64_t, std::pair<std::string, std::string>> held_replies_;
  uint64_t next_token_ = 1;

  bool draining_ = false;
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_sweep_ = Clock::now();
  Clock::time_point last_tick_{};
  std::map<std::string, uint64_t> requests_by_op_, errors_by_code_;
  uint64_t steps_ = 0, resets_ = 0, undeliverable_ = 0;
};

std::string ServerLoop::NewId(const char* prefix) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix, static_cast<unsigned long long>(rng_()));
  return buf;
}

void ServerLoop::SendTo(zmq::socket_t& socket, const std::string& identity, const std::string& bytes) {
  try {
    std::array<zmq::const_buffer, 2> frames{zmq::buffer(identity), zmq::buffer(bytes)};
    // ROUTER_MANDATORY: a peer that went away is an error here (EHOSTUNREACH), not a silent drop.
    if (!zmq::send_multipart(socket, frames, zmq::send_flags::dontwait)) ++undeliverable_;
  } catch (const zmq::error_t& e) {
    ++undeliverable_;
    spdlog::debug("reply undeliverable: {}", e.what());
  }
}

void ServerLoop::ReplyError(const std::string& client, uint64_t id, ErrorCode code, const std::string& op,
                            std::string message, std::map<std::string, std::string> details) {
  ++errors_by_code_[std::string(protocol::ErrorCodeName(code))];
  if (!op.empty()) details["op"] = op;
  SendTo(clients_, client, protocol::EncodeErrorReply(id, Error{code, std::move(message), std::move(details)}));
}

void ServerLoop::Deliver(const std::string& client, std::string reply, std::optional<std::string> record) {
  if (!record) return SendTo(clients_, client, reply);
  const uint64_t token = next_token_++;
  held_replies_.emplace(token, std::make_pair(client, std::move(reply)));
  recorder_->Submit(token, std::move(*record));
}

void ServerLoop::DeliverDurable() {
  if (!recorder_) return;
  for (uint64_t token : recorder_->TakeDurable()) {
    auto it = held_replies_.find(token);
    if (it == held_replies_.end()) continue;
    SendTo(clients_, it->second.first, it->second.second);
    held_replies_.erase(it);
  }
  // A record that could not be written must not cost the policy its step: the reply goes out,
  // and the failure shows in the log and in stats (recorder.healthy = false).
  for (const FailedRecord& failed : recorder_->TakeFailed()) {
    spdlog::error("trajectory record lost: {}", failed.error);
    auto it = held_replies_.find(failed.token);
    if (it == held_replies_.end()) continue;
    SendTo(clients_, it->second.first, it->second.second);
    held_replies_.erase(it);
  }
}

bool ServerLoop::EnsureRecorder(std::string& error) {
  if (recorder_) {
    if (recorder_->healthy()) return true;
    error = "the trajectory store is failing: " + recorder_->stats().last_error;
    return false;
  }
  recorder_ = TrajectoryRecorder::Open(options_.record_dir, RecorderOptions{}, error);
  if (!recorder_) return false;
  spdlog::info("recording trajectories to {}", options_.record_dir.string());
  return true;
}

void ServerLoop::OnClientMessage(const std::string& client, std::string_view bytes) {
  protocol::DecodedRequest decoded = protocol::DecodeRequest(bytes);
  ++requests_by_op_[decoded.op.empty() ? "?" : decoded.op];
  if (!decoded.request) {
    ++errors_by_code_[std::string(protocol::ErrorCodeName(decoded.error.code))];
    SendTo(clients_, client, protocol::EncodeErrorReply(decoded.id, decoded.error));
    return;
  }
  try {
    Handle(client, *decoded.request);
  } catch (const std::exception& e) {
    // A bug must still be an answer naming the op, and the loop keeps serving.
    spdlog::error("{}: internal error: {}", decoded.op, e.what());
    ReplyError(client, decoded.request->id, ErrorCode::kInternal, decoded.op, decoded.op + ": internal error: " + e.what());
  }
}

void ServerLoop::Handle(const std::string& client, const protocol::Request& request) {
  const uint64_t id = request.id;
  const std::string op(protocol::OpName(request.body));
  if (draining_ && op != "hello" && op != "stats" && op != "env.close") {
    return ReplyError(client, id, ErrorCode::kOverloaded, op, op + ": the server is shutting down",
                      {{"retry_after_s", "5"}, {"reason", "shutting_down"}});
  }
  std::visit(
      [&](const auto& body) {
        using B = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<B, protocol::HelloRequest>) Hello(client, id);
        else if constexpr (std::is_same_v<B, protocol::TasksListRequest>) {
          json list = json::array();
          for (const Task* task : tasks_.All())
            if (body.suite.empty() || task->Suite() == body.suite) list.push_back(TaskSummary(*task));
          ReplyResult(client, id, {{"tasks", list}});
        } else if constexpr (std::is_same_v<B, protocol::TasksGetRequest>) {
          const Task* task = tasks_.Find(body.task);
          if (!task)
            return ReplyError(client, id, ErrorCode::kUnknownTask, op, op + ": no task '" + body.task + "'",
                              {{"task", body.task}});
          ReplyResult(client, id, TaskDetails(*task));
        } else if constexpr (std::is_same_v<B, protocol::EnvMakeRequest>) Make(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvResetRequest>) Reset(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvStepRequest>) Step(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvForkRequest>) Fork(client, id, body);
        else if constexpr (std::is_same_v<B, protocol::EnvCloseRequest>) Close(client, id, body);
        else ReplyResult(client, id, Stats());
      },
      request.body);
}

void ServerLoop::Hello(const std::string& client, uint64_t id) {
  protocol::HelloResult hello;
  hello.server = std::string("kernelgym ") + KERNELGYM_VERSION;
  hello.backends = scheduler_.Backends();
  if (options_.null_backend) hello.backends.push_back("null");
  hello.rewards = RewardRegistry::Global().Names();
  hello.action_kinds = {"replace", "edit", "patch", "knobs", "revert", "submit"};
  hello.feature_names = FeatureNames();
  hello.default_max_steps = options_.default_max_steps;
  hello.default_time_budget_s = options_.default_time_budget_s;
  hello.max_message_bytes = protocol::kMaxMessageBytes;
  SendTo(clients_, client, protocol::EncodeHelloReply(id, hello));
}

void ServerLoop::Make(const std::string& client, uint64_t id, const protocol::EnvMakeRequest& r) {
  const std::string op = "env.make";
  const Task* task = tasks_.Find(r.task);
  if (!task) return ReplyError(client, id, ErrorCode::kUnknownTask, op, op + ": no task '" + r.task + "'", {{"task", r.task}});
  const std::vector<std::string> connected = scheduler_.Backends();
  const auto& known = options_.known_backends;
  const bool backend_ok = (options_.null_backend && r.backend == "null") ||
                          std::find(known.begin(), known.end(), r.backend) != known.end() ||
                          std::find(connected.begin(), connected.end(), r.backend) != connected.end();
  if (!backend_ok)
    return ReplyError(client, id, ErrorCode::kUnknownBackend, op, op + ": no backend '" + r.backend + "'",
                      {{"backend", r.backend}});
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

  EpisodeLimits limits;
  limits.max_steps = r.max_steps > 0 ? r.max_steps : options_.default_max_steps;
  limits.time_budget_s = r.time_budget_s > 0 ? r.time_budget_s : options_.default_time_budget_s;
  // Tasks live as long as the registry (the whole run): a non-owning shared_ptr.
  std::shared_ptr<const Task> task_ptr(std::shared_ptr<const Task>{}, task);
  std::string env = NewId("env-");
  Session& session = sessions_[env];
  session.episode = std::make_unique<Episode>(task_ptr, r.backend, r.reward, std::move(reward), limits);
  session.record = r.record;
  session.last_active = Clock::now();

  protocol::EnvInfo info{env, task->id, r.backend, r.reward, session.episode->reward().range().min,
                         session.episode->reward().range().max, limits.max_steps, limits.time_budget_s, r.record};
  ReplyResult(client, id, protocol::ToWire(info));
}

Session* ServerLoop::FindEnv(const std::string& client, uint64_t id, const std::string& op, const std::string& env,
                             bool must_be_idle) {
  auto it = sessions_.find(env);
  if (it == sessions_.end()) {
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
  // Drawn seeds stay below 2^53, so that every JSON reader of the trajectory store (pandas,
  // JavaScript) holds them exactly.
  const uint64_t seed = r.seed ? *r.seed : rng_() & ((uint64_t{1} << 53) - 1);
  const EvaluationRequest request = session->episode->Reset(seed);
  session->episode_id = NewId("ep-");
  ++resets_;
  Evaluate(*session, request, Pending{r.env, client, id, std::nullopt, ""}, "env.reset");
}

void ServerLoop::Step(const std::string& client, uint64_t id, const protocol::EnvStepRequest& r) {
  Session* session = FindEnv(client, id, "env.step", r.env, true);
  if (!session) return;
  Episode& episode = *session->episode;
  if (!episode.active())
    return ReplyError(client, id, ErrorCode::kEpisodeOver, "env.step",
                      std::string("env.step: env '") + r.env + "' " +
                          (episode.was_reset() ? "has terminated or been truncated" : "has not been reset") +
                          "; call env.reset",
                      {{"env", r.env}});
  Pending pending{r.env, client, id, r.action, episode.last_text()};
  Episode::Plan plan = episode.PlanStep(r.action);
  ++steps_;
  if (!plan.evaluation) return Finish(pending, nullptr, "");
  Evaluate(*session, *plan.evaluation, std::move(pending), "env.step");
}

bool ServerLoop::Evaluate(Session& session, const EvaluationRequest& request, Pending pending, const std::string& op) {
  Episode& episode = *session.episode;
  if (episode.backend() == "null") {
    const EvalResult result = NullResult(episode.task());
    Finish(pending, &result, "null");
    return true;
  }
  protocol::runner::Job job;
  job.job_id = next_job_id_++;
  job.backend = episode.backend();
  job.task = episode.task_id();
  job.source = request.source;
  job.options.seeds = request.seeds;
  job.options.timing_seed = request.timing_seed;
  if (request.submit) {  // the final evaluation: a longer budget and a tighter interval
    job.options.timing_budget_s = 3.0;
    job.options.min_rounds = 40;
    job.options.target_relative_ci = 0.02;
  }
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
    record = TransitionRecord(RecordContextFor(session, pending.env, runner), *pending.action, pending.prompt, step, result);
  Deliver(pending.client, protocol::EncodeReply(pending.request_id, step), std::move(record));
}

void ServerLoop::OnJobDone(JobOutcome outcome) {
  auto it = pending_.find(outcome.job_id);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  Finish(pending, &outcome.result, outcome.runner, outcome.attempts);
}

void ServerLoop::FailPending(uint64_t job_id, const Pending& pending, ErrorCode code, const std::string& message) {
  scheduler_.Cancel(job_id);
  auto it = sessions_.find(pending.env);
  if (it != sessions_.end()) {
    it->second.episode->Abandon();
    it->second.job_id = 0;
  }
  ReplyError(pending.client, pending.request_id, code, pending.action ? "env.step" : "env.reset", message,
             {{"env", pending.env}});
}

void ServerLoop::Fork(const std::string& client, uint64_t id, const protocol::EnvForkRequest& r) {
  Session* parent = FindEnv(client, id, "env.fork", r.env, true);
  if (!parent) return;
  if (sessions_.size() >= options_.max_sessions)
    return ReplyError(client, id, ErrorCode::kOverloaded, "env.fork", "env.fork: this server holds its maximum of envs",
                      {{"retry_after_s", "10"}});
  Session child;
  child.episode = parent->episode->Fork();
  child.record = parent->record;
  child.episode_id = parent->episode_id.empty() ? "" : NewId("ep-");
  child.last_active = Clock::now();
  const Episode& e = *child.episode;
  std::string env = NewId("env-");
  protocol::EnvInfo info{env, e.task_id(), e.backend(), e.reward_name(), e.reward().range().min,
                         e.reward().range().max, e.limits().max_steps, e.limits().time_budget_s, child.record};
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
      pending_.erase(pending);
    }
  }
  sessions_.erase(r.env);
  ReplyResult(client, id, json::object());
}

json ServerLoop::Stats() {
  const auto now = Clock::now();
  std::size_t session_bytes = 0;
  for (const auto& [env, session] : sessions_) session_bytes += session.episode->ApproximateBytes();
  json recorder = nullptr;
  if (recorder_) {
    const RecorderStats r = recorder_->stats();
    recorder = {{"records_written", r.records_written}, {"bytes_written", r.bytes_written}, {"batches", r.batches},
                {"segments", r.segments}, {"failed", r.failed}, {"queued", r.queued}, {"healthy", r.healthy},
                {"last_error", r.last_error}, {"segment", r.segment.string()}};
  }
  json local = nullptr;
  if (local_runners_) local = {{"pids", local_runners_->pids()}, {"restarts", local_runners_->restarts()}};
  return {{"uptime_s", Seconds(now - started_)},
          {"sessions", sessions_.size()},
          {"session_bytes", session_bytes},
          {"pending", pending_.size()},
          {"held_for_recorder", held_replies_.size()},
          {"resets", resets_},
          {"steps", steps_},
          {"requests", requests_by_op_},
          {"errors", errors_by_code_},
          {"undeliverable_replies", undeliverable_},
          {"rss_bytes", ResidentBytes()},
          {"open_fds", OpenFileDescriptors()},
          {"draining", draining_},
          {"scheduler", scheduler_.Stats(now)},
          {"local_runners", local},
          {"recorder", recorder}};
}

void ServerLoop::Tick(Clock::time_point now) {
  std::vector<JobOutcome> done;
  scheduler_.Tick(now, done);
  for (JobOutcome& outcome : done) OnJobDone(std::move(outcome));
  if (local_runners_) local_runners_->Supervise(now);
  if (Seconds(now - last_sweep_) < 1.0) return;
  last_sweep_ = now;
  // Envs whose client went away (or forgot them): closed after the idle timeout.
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (!it->second.job_id && Seconds(now - it->second.last_active) > options_.session_idle_timeout_s) {
      spdlog::info("env {} closed after {} s idle", it->first, options_.session_idle_timeout_s);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

int ServerLoop::Run(const std::atomic<bool>& stop) {
  // Tasks.
  tasks_ = TaskRegistry::LoadFrom(options_.suites_root);
  for (const std::string& e : tasks_.errors()) spdlog::warn("task not loaded: {}", e);
  RegisterBuiltinRewards();

  for (zmq::socket_t* s : {&clients_, &runners_}) {
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::router_mandatory, 1);
    s->set(zmq::sockopt::sndhwm, 100000);
    s->set(zmq::sockopt::rcvhwm, 100000);
    // ZeroMQ drops the connection of a peer that sends more than this, without a word; below it,
    // an oversized request (> kMaxMessageBytes) gets a BAD_REQUEST reply from the decoder.
    s->set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
  }
  try {
    clients_.bind(options_.client_endpoint);
    runners_.bind(options_.runner_endpoint);
  } catch (const zmq::error_t& e) {
    spdlog::error("cannot bind {} / {}: {}", options_.client_endpoint, options_.runner_endpoint, e.what());
    return 2;
  }
  const std::string client_endpoint = clients_.get(zmq::sockopt::last_endpoint);
  const std::string runner_endpoint = runners_.get(zmq::sockopt::last_endpoint);
  spdlog::info("serving clients on {}, runners on {}; {} tasks", client_endpoint, runner_endpoint, tasks_.All().size());
  if (!options_.endpoint_file.empty()) {
    const std::filesystem::path tmp = options_.endpoint_file.string() + ".tmp";
    std::ofstream(tmp) << json{{"clients", client_endpoint}, {"runners", runner_endpoint}, {"pid", getpid()}}.dump()
                       << "\n";
    std::filesystem::rename(tmp, options_.endpoint_file);  // atomic: readers never see half a file
  }
  if (options_.local_runners > 0 && !options_.runner_argv.empty()) {
    local_runners_ = std::make_unique<LocalRunners>(options_.runner_argv, runner_endpoint, options_.local_runners);
    local_runners_->Start();
  }

  Clock::time_point drain_deadline{};
  std::vector<JobOutcome> done;
  while (true) {
    if (stop.load() && !draining_) {
      draining_ = true;
      drain_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options_.drain_timeout_s));
      spdlog::info("stopping: {} evaluation(s) in flight, {} repl(ies) waiting for the recorder", pending_.size(),
                   held_replies_.size());
    }
    if (draining_) {
      if (pending_.empty() && held_replies_.empty()) break;
      if (Clock::now() >= drain_deadline) {
        for (auto& [job_id, pending] : std::unordered_map<uint64_t, Pending>(pending_))
          FailPending(job_id, pending, ErrorCode::kRunnerLost, "the server stopped before this evaluation finished");
        pending_.clear();
        break;
      }
    }

    std::vector<zmq::pollitem_t> items{{clients_.handle(), 0, ZMQ_POLLIN, 0}, {runners_.handle(), 0, ZMQ_POLLIN, 0}};
    if (recorder_) items.push_back({nullptr, recorder_->notify_fd(), ZMQ_POLLIN, 0});
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(50));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // a signal (SIGTERM): the loop's top notices the stop flag
    }
    const auto now = Clock::now();

    // Bounded batches per wake-up, so neither side can starve the other.
    for (int n = 0; n < 256 && (items[0].revents & ZMQ_POLLIN); ++n) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(clients_, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
      if (frames.size() < 2) continue;
      const std::string identity = frames.front().to_string();
      // DEALER sends [payload]; REQ-style clients add an empty delimiter first.
      if (frames.size() == 3 && frames[1].size() == 0) frames.erase(frames.begin() + 1);
      if (frames.size() != 2) {
        ReplyError(identity, 0, ErrorCode::kBadRequest, "", "a request must be one message part, not " +
                                                                 std::to_string(frames.size() - 1));
        continue;
      }
      OnClientMessage(identity, frames[1].to_string_view());
    }
    for (int n = 0; n < 256 && (items[1].revents & ZMQ_POLLIN); ++n) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(runners_, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
      if (frames.size() != 2) continue;
      done.clear();
      try {
        scheduler_.OnRunnerMessage(frames[0].to_string(), frames[1].to_string_view(), now, done);
        for (JobOutcome& outcome : done) OnJobDone(std::move(outcome));
      } catch (const std::exception& e) {  // a bug: logged, and the loop keeps serving
        spdlog::error("runner message: internal error: {}", e.what());
      }
    }
    if (recorder_) DeliverDurable();
    // Timeouts, reaping and supervision need no finer grain than this; running them after every
    // message would cost the request path for nothing.
    if (now - last_tick_ >= std::chrono::milliseconds(10)) {
      last_tick_ = now;
      Tick(now);
    }
  }

  if (recorder_) {
    recorder_->Close();
    DeliverDurable();
  }
  // Requests that arrived while the last steps finished are answered, not dropped: a client
  // waiting on one learns that the server is going away.
  for (int n = 0; n < 10000; ++n) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(clients_, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
    if (frames.size() < 2) continue;
    const protocol::DecodedRequest decoded = protocol::DecodeRequest(frames.back().to_string_view());
    ReplyError(frames.front().to_string(), decoded.id, ErrorCode::kOverloaded, decoded.op,
               "the server is shutting down", {{"retry_after_s", "5"}, {"reason", "shutting_down"}});
  }
  if (local_runners_) local_runners_->Stop(std::chrono::milliseconds(5000));
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int RunServer(const ServerOptions& options, const std::atomic<bool>& stop) {
  zmq::context_t context(1);
  int code = 0;
  {
    ServerLoop loop(options, context);
    code = loop.Run(stop);
  }
  context.close();
  return code;
}

}  // namespace kernelgym::server
