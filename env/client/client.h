// The C++ client of `kernelgym serve` (docs/protocol.md, "C++ client"). Policies link this
// library (kernelgym_client) and the protocol's plain types, never server code.
//
// Two ways to use one Client, which mix freely:
//   sync   Hello(), Make(), Reset(), Step(), ... send one request and wait for its reply.
//   async  Send(body) returns the request id at once; Recv(timeout) returns whichever reply
//          arrives first (EnvPool style: keep many envs stepping, handle replies as they come);
//          AsStepResult(reply) etc. turn a Reply into its typed result.
// Replies are matched by id, so a sync call made while async requests are outstanding works:
// the async replies that arrive meanwhile are kept for Recv(), never lost.
//
// Timeouts and retries. A sync call waits `request_timeout_s` for its reply. When none comes:
//   - the idempotent ops (hello, tasks.list, tasks.get, stats, health) are sent again on a fresh socket
//     (a new connection), after an exponential backoff with jitter, up to `retries` more times;
//     a reply to any of the attempts answers the call. Then TransportError.
//   - the env.* ops are not retried: TransportError at once. Re-sending env.step could apply an
//     action twice, env.make could create a second env, so whether the request took effect is
//     unknown; the caller decides (e.g. close the env and make a new one). A reply that comes
//     after the timeout is dropped.
// A server that refuses the connection's handshake (a key not on its allow-list, CURVE on one
// side only) makes the waiting call throw AuthError at once, with the reason.
//
// Async requests (Send) are never retried and have no deadline of their own: Recv's timeout is
// the caller's.
//
// Between requests the socket reconnects by itself when the server goes away and comes back
// (ZMQ_RECONNECT_IVL = backoff_initial_s, doubling up to ZMQ_RECONNECT_IVL_MAX = backoff_max_s).
//
// Server restarts. The server's instance (random per server process) comes with hello, health,
// env.make and env.fork. When a reply names another instance than the one seen before, every
// request sent before it and still waiting fails at once with ServerError SERVER_RESTARTED (its
// reply would never come: the old process is gone). While requests wait, a reconnect of the
// socket (the server went away and something answers again) sends one `health` probe to learn the
// instance there, so a restart is noticed within the reconnect interval, not at the timeout. A
// request naming an env of the old process is answered SERVER_RESTARTED by the new one.
//
// Threads: a Client is used by one thread at a time (like the ZeroMQ socket inside it). Use one
// Client per thread, or guard it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "env/client/errors.h"
#include "env/protocol/messages.h"
#include "env/protocol/results.h"
#include "env/protocol/task_info.h"
#include "env/security/keys.h"

namespace kernelgym::client {

struct ClientOptions {
  std::string endpoint;                               // the server's client endpoint, e.g. "tcp://127.0.0.1:5555"
  double request_timeout_s = 600;                     // per attempt of a sync call (an evaluation can take minutes)
  int retries = 3;                                    // further attempts of an idempotent op after a timeout
  double backoff_initial_s = 0.1, backoff_max_s = 5;  // retry backoff and reconnect interval
  // CURVE (docs/security.md): the server's public key and this client's key pair. When unset,
  // read from the certificate files named by $KERNELGYM_SERVER_KEY and $KERNELGYM_CLIENT_KEY if
  // they are set (the constructor throws TransportError naming a file it cannot read), else the
  // connection is plaintext (what a loopback server that is not strict accepts).
  std::optional<security::CurveClientKeys> curve = std::nullopt;
};

// One reply, as Recv() returns it.
struct Reply {
  uint64_t id = 0;
  std::string op;  // the op of the request it answers
  bool ok = false;
  protocol::Error error;  // when !ok
  nlohmann::json result;  // when ok: the result map (docs/protocol.md, per op)
};

// Reply -> typed result. Throw ServerError when the reply is an error, ProtocolError (naming the
// field) when the result does not have the op's format.
const nlohmann::json& ResultOf(const Reply& reply);
protocol::HelloResult AsHelloResult(const Reply& reply);
protocol::EnvInfo AsEnvInfo(const Reply& reply);  // env.make, env.fork
protocol::ResetResult AsResetResult(const Reply& reply);
protocol::StepResult AsStepResult(const Reply& reply);
protocol::HealthResult AsHealthResult(const Reply& reply);
std::vector<protocol::TaskSummary> AsTaskSummaries(const Reply& reply);  // tasks.list
protocol::TaskInfo AsTaskInfo(const Reply& reply);                       // tasks.get

// hello, tasks.list, tasks.get, stats and health: the ops a sync call retries after a timeout.
bool IsIdempotent(std::string_view op);

class Client {
 public:
  // Connects lazily: nothing is sent until the first request, and a server that is not up yet
  // is waited for (within the request timeout). Throws TransportError for a malformed endpoint.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // ---- sync: each throws ServerError, TransportError or ProtocolError (errors.h) ----
  protocol::HelloResult Hello();
  std::vector<protocol::TaskSummary> ListTasks(const std::string& suite = "");  // "": every suite
  protocol::TaskInfo GetTask(const std::string& task);
  protocol::EnvInfo Make(const protocol::EnvMakeRequest& request);
  protocol::ResetResult Reset(const std::string& env, std::optional<uint64_t> seed = std::nullopt);
  // `meta`: kept with the step in the trajectory store (EnvStepRequest::meta); a map.
  protocol::StepResult Step(const std::string& env, const protocol::Action& action,
                            nlohmann::json meta = nlohmann::json::object());
  protocol::EnvInfo Fork(const std::string& env);
  void Close(const std::string& env);
  nlohmann::json Stats();
  // Status ("ok" / "draining"), uptime, open envs, runners per backend, queued evaluations.
  protocol::HealthResult Health();

  // ---- async ----
  // Sends one request and returns its id (the Reply's id). Throws TransportError when the
  // request cannot even be queued (the send buffer stayed full for request_timeout_s).
  uint64_t Send(protocol::RequestBody body);
  // The next reply to a Send(), in arrival order: a reply that already arrived (also during a
  // sync call) at once, otherwise waits up to `timeout_s` (< 0: no limit). nullopt when none
  // came in time, or at once when no Send() is outstanding. Throws ProtocolError for a reply that
  // cannot be read (its id() names the request when it could be told).
  std::optional<Reply> Recv(double timeout_s);
  // Send()s whose reply Recv() has not returned yet.
  std::size_t outstanding() const;

  // Replies that answered no request of this client (neither outstanding nor given up on); they
  // are dropped. Non-zero means a server bug.
  uint64_t stray_replies() const;
  const ClientOptions& options() const;
  // The server instance last seen in a reply ("" before the first hello, health, env.make or env.fork).
  const std::string& server_instance() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelgym::client
