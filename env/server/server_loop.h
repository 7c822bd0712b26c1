// The server's event loop as a class, shared by its two source files: server.cc (transport,
// the loop, housekeeping) and requests.cc (one handler per client op, evaluations, replies).
// Everything here is owned and touched by the event loop thread only.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <zmq.hpp>

#include "datasets/suite.h"
#include "datasets/trajectory/recorder.h"
#include "env/episode/episode.h"
#include "env/protocol/codec.h"
#include "env/protocol/messages.h"
#include "env/protocol/results.h"
#include "env/server/local_runners.h"
#include "env/server/task_info.h"
#include "env/server/records.h"
#include "env/server/patch_workers.h"
#include "env/server/scheduler.h"
#include "env/security/zap.h"
#include "env/server/server.h"

namespace kernelgym::server::detail {

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Session {
  std::unique_ptr<Episode> episode;
  Clock::time_point last_active;
  bool record = false;
  std::string episode_id;   // unique per reset (the trajectory store groups by it)
  uint64_t job_id = 0;      // the evaluation in flight, 0 when none
  std::string principal;    // the client that made it (quotas.h), charged for it while it is open
};

// A reset or step waiting for its evaluation.
struct Pending {
  std::string env;
  std::string client;       // ZeroMQ identity of the client that asked
  uint64_t request_id = 0;
  std::optional<protocol::Action> action;  // empty for a reset
  std::string prompt;       // the observation the action was chosen from (recorded)
  nlohmann::json meta;      // the step request's meta (recorded)
  std::string principal;    // the client charged for the evaluation (quotas.h)
  bool counted = false;     // counted in the principal's in-flight quota
};

class ServerLoop {
 public:
  ServerLoop(const ServerOptions& options, zmq::context_t& context)
      : options_(options),
        context_(context),
        clients_(context, zmq::socket_type::router),
        runners_(context, zmq::socket_type::router),
        scheduler_(options.scheduler, instance_,
                   [this](const std::string& identity, const std::string& bytes) { SendToRunner(identity, bytes); }),
        rng_(std::random_device{}()) {}

  int Run(const std::atomic<bool>& stop);

 private:
  // ---- transport ----
  // To a runner (SendToRunner); a client's replies go through SendToClient.
  void SendTo(zmq::socket_t& socket, const std::string& identity, const std::string& bytes);
  // Replies to clients: straight to the socket, or — when the client has left
  // kMaxQueuedRepliesPerClient replies unread in ZeroMQ's queue — to its outbox, up to
  // kMaxOutboxBytesPerClient, then dropped and counted (docs/protocol.md, "Limits").
  void SendToClient(const std::string& identity, std::string bytes);
  void FlushOutboxes();  // each loop turn: what the clients' queues take again
  void SendToRunner(const std::string& identity, const std::string& bytes) { SendTo(runners_, identity, bytes); }
  void ReplyError(const std::string& client, uint64_t id, protocol::ErrorCode code, const std::string& op, std::string message,
                  std::map<std::string, std::string> details = {});
  void ReplyResult(const std::string& client, uint64_t id, const nlohmann::json& result) {
    SendToClient(client, protocol::EncodeResultReply(id, result));
  }
  // Sends a reset/step reply, after its record is durable when the env records.
  void Deliver(const std::string& client, std::string reply, std::optional<std::string> record);

  // ---- requests ----
  // `principal`: who sent it, for the quotas: the CURVE key's name, else the connection.
  void OnClientMessage(const std::string& client, std::string_view bytes, const std::string& principal);
  void Handle(const std::string& client, const protocol::Request& request);
  void Hello(const std::string& client, uint64_t id);
  void Make(const std::string& client, uint64_t id, const protocol::EnvMakeRequest& r);
  void Reset(const std::string& client, uint64_t id, const protocol::EnvResetRequest& r);
  void Step(const std::string& client, uint64_t id, const protocol::EnvStepRequest& r);
  void Fork(const std::string& client, uint64_t id, const protocol::EnvForkRequest& r);
  void Close(const std::string& client, uint64_t id, const protocol::EnvCloseRequest& r);
  nlohmann::json Stats();
  // The env named by a request, or an error reply (UNKNOWN_ENV / ENV_BUSY) and nullptr.
  Session* FindEnv(const std::string& client, uint64_t id, const std::string& op, const std::string& env,
                   bool must_be_idle);

  // ---- evaluations ----
  // Starts the evaluation of a reset or step. False (and an OVERLOADED reply) when the queue is full.
  bool Evaluate(Session& session, const EvaluationRequest& request, Pending pending, const std::string& op);
  void OnJobDone(JobOutcome outcome);
  // The patches PatchWorkers applied: each step goes on as PlanStep would have (evaluate or answer).
  void OnPatchesApplied();
  // `attempts`: how many runners the evaluation was sent to (more than 1 after a runner was lost).
  void Finish(const Pending& pending, const EvalResult* result, const std::string& runner, int attempts = 0);
  void FailPending(uint64_t job_id, const Pending& pending, protocol::ErrorCode code, const std::string& message);
  // A quota refusal as an OVERLOADED reply naming the quota.
  void ReplyQuota(const std::string& client, uint64_t id, const std::string& op, const QuotaRefusal& refusal);
  // The pending evaluation left the in-flight count (answered, failed or dropped).
  void Uncount(const Pending& pending, double seconds);
  RecordContext RecordContextFor(const Session& session, const std::string& env, const std::string& runner) const;

  // ---- security (auth.cc) ----
  // Checks the endpoints against the security options and, with a server key, starts the ZAP
  // handler, puts CURVE on both sockets and gives local runners a key (appended to their argv).
  // False (logged) when the server must not start.
  bool SetUpSecurity(std::vector<std::string>& runner_argv);
  void RemoveRunnerKeys();

  bool EnsureRecorder(std::string& error);
  void DeliverDurable();
  void Tick(Clock::time_point now);
  std::string NewId(const char* prefix);
  // malloc's bytes in use (mallinfo2): measured, not estimated. Costs a walk of malloc's bins, so
  // it is read once a second (heap_bytes_) and by `stats`.
  static std::size_t HeapBytes();
  // The memory bound (ServerOptions::max_heap_bytes): an OVERLOADED reply (reason "memory") and
  // true when the heap is at or past it.
  bool RefuseForMemory(const std::string& client, uint64_t id, const std::string& op);
  static std::string NewInstanceId();
  // When `env` is an env id of another server instance: that instance's id.
  static std::optional<std::string> InstanceOfEnv(const std::string& env);

  const ServerOptions& options_;
  zmq::context_t& context_;
  std::unique_ptr<security::ZapHandler> zap_;  // answers CURVE handshakes on its own thread
  bool curve_ = false;
  std::filesystem::path runner_key_dir_;  // the local runners' key pair (removed at exit)
  zmq::socket_t clients_, runners_;
  zmq::socket_t metrics_;  // ZMQ_STREAM (plain TCP) for --metrics-bind; unset without it
  void OnMetricsRequest();
  // This process's id, random per start: in every job (scheduler.h), in hello, health and stats,
  // and in every env id ("env-<instance>-<random>"), so that a request naming an env of an earlier
  // process is answered SERVER_RESTARTED rather than UNKNOWN_ENV.
  const std::string instance_ = NewInstanceId();
  Scheduler scheduler_;
  TaskRegistry tasks_;
  // Per task id, tasks.list's and tasks.get's answers as wire trees, built once at load.
  struct TaskInfoWire {
    nlohmann::json summary, details;
  };
  std::unordered_map<std::string, TaskInfoWire> task_info_;
  std::unique_ptr<LocalRunners> local_runners_;
  std::unique_ptr<TrajectoryRecorder> recorder_;
  PatchWorkers patch_workers_;
  std::unordered_map<uint64_t, Pending> patching_;  // token -> the step whose patch is being applied
  uint64_t next_patch_token_ = 1;
  std::mt19937_64 rng_;

  ClientQuotas quotas_{options_.quotas};
  std::string principal_;  // the sender of the request being handled (set by OnClientMessage)
  std::unordered_map<std::string, Session> sessions_;
  std::unordered_map<uint64_t, Pending> pending_;  // by job id
  uint64_t next_job_id_ = 1;
  // Replies held until their records are durable, by recorder token.
  std::unordered_map<uint64_t, std::pair<std::string, std::string>> held_replies_;
  uint64_t next_token_ = 1;

  std::size_t heap_bytes_ = 0, heap_bytes_at_start_ = 0;
  uint64_t closed_since_trim_ = 0;  // env.close since the last malloc_trim
  uint64_t refused_for_memory_ = 0;
  bool draining_ = false;
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_sweep_ = Clock::now();
  Clock::time_point last_tick_{};
  std::map<std::string, uint64_t> requests_by_op_, errors_by_code_;
  uint64_t steps_ = 0, resets_ = 0, undeliverable_ = 0;
  struct Outbox {
    std::deque<std::string> replies;
    std::size_t bytes = 0;
  };
  std::unordered_map<std::string, Outbox> outboxes_;  // only clients that have a backlog
  std::size_t outbox_bytes_ = 0;                       // over all of them
};

}  // namespace kernelgym::server::detail
