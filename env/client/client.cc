#include "env/client/client.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <deque>
#include <list>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>
#include <zmq.hpp>

#include "env/protocol/codec.h"
#include "env/security/curve_socket.h"
#include "env/security/handshake_watch.h"

namespace kernelgym::client {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, s)));
}

int Milliseconds(double s) { return static_cast<int>(std::clamp(std::ceil(s * 1000), 1.0, 2.0e9)); }

std::string FormatSeconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g s", s);
  return buffer;
}

// A reply as it came off the wire: either a Reply, or why it could not be read.
struct Arrived {
  Reply reply;
  std::string problem;  // non-empty: malformed
};

template <typename T>
T Typed(const Reply& reply, std::optional<T> (*from_wire)(const json&, std::string&)) {
  const json& result = ResultOf(reply);
  std::string problem;
  std::optional<T> typed = from_wire(result, problem);
  if (!typed)
    throw ProtocolError(reply.op + " reply " + std::to_string(reply.id) + " has a malformed result: " + problem,
                        reply.id);
  return *std::move(typed);
}

}  // namespace

const json& ResultOf(const Reply& reply) {
  if (!reply.ok) throw ServerError(reply.op, reply.error);
  return reply.result;
}
protocol::HelloResult AsHelloResult(const Reply& reply) { return Typed(reply, &protocol::HelloResultFromWire); }
protocol::EnvInfo AsEnvInfo(const Reply& reply) { return Typed(reply, &protocol::EnvInfoFromWire); }
protocol::ResetResult AsResetResult(const Reply& reply) { return Typed(reply, &protocol::ResetResultFromWire); }
protocol::StepResult AsStepResult(const Reply& reply) { return Typed(reply, &protocol::StepResultFromWire); }
protocol::HealthResult AsHealthResult(const Reply& reply) { return Typed(reply, &protocol::HealthResultFromWire); }
std::vector<protocol::TaskSummary> AsTaskSummaries(const Reply& reply) {
  return Typed(reply, &protocol::TaskListFromWire);
}
protocol::TaskInfo AsTaskInfo(const Reply& reply) { return Typed(reply, &protocol::TaskInfoFromWire); }

bool IsIdempotent(std::string_view op) {
  return op == "hello" || op == "tasks.list" || op == "tasks.get" || op == "stats" || op == "health";
}

// Owns the ZeroMQ context and the connections. Invariants:
//   - connections_.back() is the current connection: every new request is sent on it. Older
//     ones (left by a retry) stay open while a request sent on them is pending, so that their
//     replies still arrive, and are closed when none is.
//   - every id is in at most one of pending_ (waiting for a reply), abandoned_ (given up on: its
//     reply is dropped), sync_arrived_ / ready_ (arrived, not yet handed out).
//   - at most one sync call is in progress (one thread), so every sync entry of pending_ and
//     sync_arrived_ belongs to it.
struct Client::Impl {
  struct Connection {
    zmq::socket_t socket;
    security::HandshakeWatch watch;
    int handshakes = 0;  // watch.successes() as last seen: a rise past 1 is a reconnect
  };
  struct Pending {
    std::string op;
    Connection* connection;
    bool sync;
  };

  explicit Impl(ClientOptions o) : options(std::move(o)), rng(std::random_device{}()) {
    if (!options.curve) {
      std::string error;
      options.curve = security::ClientKeysFromEnvironment("KERNELGYM_SERVER_KEY", "KERNELGYM_CLIENT_KEY", error);
      if (!error.empty()) throw TransportError("client keys: " + error);
    }
    OpenConnection();
  }

  void OpenConnection() {
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::reconnect_ivl, Milliseconds(options.backoff_initial_s));
    socket.set(zmq::sockopt::reconnect_ivl_max,
               Milliseconds(std::max(options.backoff_max_s, options.backoff_initial_s)));
    socket.set(zmq::sockopt::sndtimeo, Milliseconds(options.request_timeout_s));
    try {
      if (options.curve) security::ApplyCurveClient(socket, *options.curve);
      // Watched from before the first connect, so the first handshake's outcome is seen.
      security::HandshakeWatch watch(context, socket, options.endpoint, options.curve.has_value());
      socket.connect(options.endpoint);
      connections.push_back(Connection{std::move(socket), std::move(watch)});
    } catch (const zmq::error_t& e) {
      throw TransportError("cannot connect to '" + options.endpoint + "': " + e.what());
    }
  }

  uint64_t SendOn(const protocol::RequestBody& body, bool sync) {
    const uint64_t id = next_id;
    const std::string op(protocol::OpName(body));
    const std::string bytes = protocol::EncodeRequest({protocol::kVersion, id, body});
    // The server answers a request over the limit with BAD_REQUEST, but one over ZeroMQ's socket
    // limit (64 MiB) closes the connection and every reply queued on it: refused here, unsent.
    if (bytes.size() > protocol::kMaxMessageBytes)
      throw std::invalid_argument(op + ": the request is " + std::to_string(bytes.size()) + " bytes, over the protocol's " +
                                  std::to_string(protocol::kMaxMessageBytes) + "-byte limit; nothing was sent");
    ++next_id;
    Connection& connection = connections.back();
    try {
      if (!connection.socket.send(zmq::buffer(bytes), zmq::send_flags::none))
        throw TransportError(op + ": could not queue the request for " + options.endpoint + " within " +
                             FormatSeconds(options.request_timeout_s) + " (send buffer full)");
    } catch (const zmq::error_t& e) {
      throw TransportError(op + ": sending to " + options.endpoint + " failed: " + e.what());
    }
    pending[id] = Pending{op, &connection, sync};
    if (!sync) ++async_outstanding;
    return id;
  }

  // Reads every message that is waiting, until `done()` or `deadline` (none: wait as long as it
  // takes).
  template <typename Done>
  void Pump(std::optional<Clock::time_point> deadline, Done done) {
    while (!done()) {
      long timeout_ms = -1;
      if (deadline) {
        const auto left = *deadline - Clock::now();
        if (left <= Clock::duration::zero()) return;
        timeout_ms = std::max<long>(1, std::chrono::ceil<std::chrono::milliseconds>(left).count());
      }
      std::vector<zmq::pollitem_t> items;
      for (Connection& c : connections) items.push_back({c.socket.handle(), 0, ZMQ_POLLIN, 0});
      for (Connection& c : connections) items.push_back(c.watch.pollitem());
      try {
        zmq::poll(items, std::chrono::milliseconds(timeout_ms));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw TransportError(std::string("waiting for replies from ") + options.endpoint + " failed: " + e.what());
      }
      std::size_t i = 0;
      for (Connection& c : connections) {
        if (items[i++].revents & ZMQ_POLLIN) Drain(c);
      }
      for (Connection& c : connections) {
        if (!(items[i++].revents & ZMQ_POLLIN)) continue;
        if (std::optional<std::string> refused = c.watch.Check()) throw AuthError(*refused);
        if (c.watch.successes() > c.handshakes) {
          const bool reconnected = c.handshakes > 0;
          c.handshakes = c.watch.successes();
          if (reconnected) Probe(c);
        }
      }
    }
  }

  // The connection came back after a break: the server may be another process now, and then the
  // requests it had will never be answered. A `health` request (answered at once, by whichever
  // server is there) says which instance is there; its reply goes through NoteInstance. Only
  // when requests are waiting on this connection, and one probe at a time.
  void Probe(Connection& connection) {
    const bool waiting = std::any_of(pending.begin(), pending.end(),
                                     [&](const auto& entry) { return entry.second.connection == &connection; });
    const bool probing =
        std::any_of(probes.begin(), probes.end(), [&](const auto& entry) { return entry.second == &connection; });
    if (!waiting || probing) return;
    const uint64_t id = next_id++;
    const std::string bytes = protocol::EncodeRequest({protocol::kVersion, id, protocol::HealthRequest{}});
    try {
      if (connection.socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) probes[id] = &connection;
    } catch (const zmq::error_t&) {  // no probe: the requests wait for their timeout as before
    }
  }

  // A result naming the server's instance (hello, health, env.make, env.fork). When it is not
  // the instance seen before, the server restarted: every request sent before `answered` (the
  // request this result answers) and still waiting went to the old process, or to a server that
  // has none of its envs, and fails now with SERVER_RESTARTED instead of at its timeout.
  void NoteInstance(const json& result, uint64_t answered) {
    auto it = result.find("instance");
    if (it == result.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return;
    const std::string seen = it->get<std::string>();
    if (instance.empty() || seen == instance) {
      instance = seen;
      return;
    }
    const std::string before = instance;
    instance = seen;
    std::vector<uint64_t> lost;
    for (const auto& [id, p] : pending)
      if (id < answered) lost.push_back(id);
    for (uint64_t id : lost) {
      const Pending p = pending.at(id);
      pending.erase(id);
      abandoned[id] = p.connection;  // should its reply come after all, it is dropped
      Arrived arrived;
      arrived.reply.op = p.op;
      arrived.reply.error =
          protocol::Error{protocol::ErrorCode::kServerRestarted,
                          p.op + ": the server at " + options.endpoint + " restarted (instance " + before + " -> " +
                              seen + ") while this request was in flight: its reply will never come" +
                              (IsIdempotent(p.op) ? "" : ", and whether it took effect on the old server is unknown"),
                          {{"op", p.op}, {"instance", seen}, {"previous_instance", before}}};
      Deliver(id, p.sync ? "sync" : "async", std::move(arrived));
    }
  }

  void Drain(Connection& connection) {
    while (true) {
      zmq::message_t message;
      if (!connection.socket.recv(message, zmq::recv_flags::dontwait)) return;
      if (!message.more()) {
        Dispatch(message.to_string_view());
        continue;
      }
      // A reply is one message part; read the rest of a multi-part one and refuse it.
      while (message.more() && connection.socket.recv(message, zmq::recv_flags::dontwait)) {
      }
      Deliver(0, "", Arrived{{}, "a reply in several message parts (the protocol sends one)"});
    }
  }

  void Dispatch(std::string_view bytes) {
    const protocol::DecodedReply decoded = protocol::DecodeReply(bytes);
    if (auto probe = decoded.id ? probes.find(decoded.id) : probes.end(); probe != probes.end()) {
      probes.erase(probe);
      std::string problem;
      if (decoded.valid && decoded.ok)
        if (std::optional<json> tree = protocol::DecodeResultTree(decoded.result, problem))
          NoteInstance(*tree, decoded.id);
      return;
    }
    auto it = decoded.id ? pending.find(decoded.id) : pending.end();
    if (it == pending.end()) {
      if (decoded.id && abandoned.erase(decoded.id)) return;  // a late reply nobody waits for
      if (decoded.valid) {
        ++stray;
        return;
      }
      // Malformed and not attributable: whoever is waiting hears of it.
      Deliver(0, "", Arrived{{}, "malformed reply from " + options.endpoint + ": " + decoded.problem});
      return;
    }
    const Pending p = it->second;
    pending.erase(it);
    Arrived arrived;
    arrived.reply.id = decoded.id;
    arrived.reply.op = p.op;
    const std::string what = p.op + " reply " + std::to_string(decoded.id);
    if (!decoded.valid) {
      arrived.problem = what + " is malformed: " + decoded.problem;
    } else if (!decoded.ok) {
      arrived.reply.error = decoded.error;
    } else if (std::string problem; auto tree = protocol::DecodeResultTree(decoded.result, problem)) {
      NoteInstance(*tree, decoded.id);
      arrived.reply.ok = true;
      arrived.reply.result = *std::move(tree);
    } else {
      arrived.problem = what + " is malformed: " + problem;
    }
    Deliver(decoded.id, p.sync ? "sync" : "async", std::move(arrived));
  }

  // `kind` is how the id was sent ("sync", "async"), or "" when the reply's request is unknown:
  // then it goes to the sync call in progress, if any, else to Recv().
  void Deliver(uint64_t id, const std::string& kind, Arrived arrived) {
    arrived.reply.id = id;
    if (kind == "sync" || (kind.empty() && sync_in_progress)) {
      sync_arrived.push_back(std::move(arrived));
      return;
    }
    if (kind == "async") --async_outstanding;
    ready.push_back(std::move(arrived));
  }

  void Abandon(uint64_t id) {
    auto it = pending.find(id);
    if (it == pending.end()) return;
    abandoned[id] = it->second.connection;
    if (!it->second.sync) --async_outstanding;
    pending.erase(it);
  }

  // Closes the retired connections nothing is pending on; their abandoned ids can no longer
  // be answered, so they are forgotten too.
  void CloseIdle() {
    for (auto c = connections.begin(); std::next(c) != connections.end();) {
      Connection* connection = &*c;
      const bool busy = std::any_of(pending.begin(), pending.end(),
                                    [&](const auto& entry) { return entry.second.connection == connection; });
      if (busy) {
        ++c;
        continue;
      }
      std::erase_if(abandoned, [&](const auto& entry) { return entry.second == connection; });
      std::erase_if(probes, [&](const auto& entry) { return entry.second == connection; });
      c = connections.erase(c);
    }
  }

  Clock::duration Backoff(int retry) {
    const double base = std::min(options.backoff_max_s, options.backoff_initial_s * std::pow(2.0, retry - 1));
    return Seconds(base * std::uniform_real_distribution<double>(0.5, 1.0)(rng));
  }

  Reply Call(const protocol::RequestBody& body) {
    const std::string op(protocol::OpName(body));
    const int attempts = IsIdempotent(op) ? 1 + std::max(0, options.retries) : 1;
    std::vector<uint64_t> ids;
    sync_in_progress = true;
    // Whatever way the call ends, its other attempts are given up on.
    struct End {
      Impl& impl;
      std::vector<uint64_t>& ids;
      ~End() {
        for (uint64_t id : ids) impl.Abandon(id);
        impl.sync_arrived.clear();
        impl.sync_in_progress = false;
        impl.CloseIdle();
      }
    } end{*this, ids};
    auto arrived = [&] { return !sync_arrived.empty(); };
    for (int attempt = 0; attempt < attempts && !arrived(); ++attempt) {
      if (attempt > 0) {
        Pump(Clock::now() + Backoff(attempt), arrived);  // an earlier attempt may still answer
        if (arrived()) break;
        OpenConnection();
      }
      ids.push_back(SendOn(body, /*sync=*/true));
      Pump(Clock::now() + Seconds(options.request_timeout_s), arrived);
    }
    if (!arrived()) {
      const bool never_shook_hands = options.curve && !connections.back().watch.succeeded();
      throw TransportError(op + ": no reply from " + options.endpoint + " within " +
                           FormatSeconds(options.request_timeout_s) +
                           (attempts > 1        ? " in each of " + std::to_string(attempts) + " attempts"
                            : IsIdempotent(op) ? ""  // retries = 0: one attempt asked for
                                               : " (not retried: " + op + " is not idempotent)") +
                           (never_shook_hands ? "; no CURVE handshake with it succeeded: is the server's public key "
                                                "right, and does it use CURVE? (docs/security.md)"
                                              : ""));
    }
    Arrived a = std::move(sync_arrived.front());
    if (!a.problem.empty()) throw ProtocolError(a.problem, a.reply.id);
    if (a.reply.op.empty()) a.reply.op = op;
    return std::move(a.reply);
  }

  std::optional<Reply> Recv(double timeout_s) {
    if (ready.empty() && async_outstanding > 0) {
      std::optional<Clock::time_point> deadline;
      if (timeout_s >= 0) deadline = Clock::now() + Seconds(timeout_s);
      Pump(deadline, [&] { return !ready.empty(); });
      CloseIdle();
    }
    if (ready.empty()) return std::nullopt;
    Arrived a = std::move(ready.front());
    ready.pop_front();
    if (!a.problem.empty()) throw ProtocolError(a.problem, a.reply.id);
    return std::move(a.reply);
  }

  ClientOptions options;
  std::mt19937_64 rng;
  zmq::context_t context;             // declared before the sockets: destroyed after them
  std::list<Connection> connections;  // back(): current; list: stable addresses for Pending
  std::map<uint64_t, Pending> pending;
  std::map<uint64_t, Connection*> abandoned;
  std::map<uint64_t, Connection*> probes;  // health requests sent by Probe(), by id
  std::string instance;                    // the server instance last seen ("" before any)
  std::deque<Arrived> sync_arrived;   // replies for the sync call in progress
  std::deque<Arrived> ready;          // replies for Send(), in arrival order
  std::size_t async_outstanding = 0;  // Send()s not yet in `ready`
  bool sync_in_progress = false;
  uint64_t next_id = 1;  // 0 is "unknown" on the wire
  uint64_t stray = 0;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
const std::string& Client::server_instance() const { return impl_->instance; }
Client::~Client() = default;

protocol::HelloResult Client::Hello() { return AsHelloResult(impl_->Call(protocol::HelloRequest{})); }

std::vector<protocol::TaskSummary> Client::ListTasks(const std::string& suite) {
  return AsTaskSummaries(impl_->Call(protocol::TasksListRequest{suite}));
}

protocol::TaskInfo Client::GetTask(const std::string& task) {
  return AsTaskInfo(impl_->Call(protocol::TasksGetRequest{task}));
}

protocol::EnvInfo Client::Make(const protocol::EnvMakeRequest& request) { return AsEnvInfo(impl_->Call(request)); }

protocol::ResetResult Client::Reset(const std::string& env, std::optional<uint64_t> seed) {
  return AsResetResult(impl_->Call(protocol::EnvResetRequest{env, seed}));
}

protocol::StepResult Client::Step(const std::string& env, const protocol::Action& action, json meta) {
  return AsStepResult(impl_->Call(protocol::EnvStepRequest{env, action, std::move(meta)}));
}

protocol::EnvInfo Client::Fork(const std::string& env) { return AsEnvInfo(impl_->Call(protocol::EnvForkRequest{env})); }

void Client::Close(const std::string& env) { ResultOf(impl_->Call(protocol::EnvCloseRequest{env})); }

json Client::Stats() { return ResultOf(impl_->Call(protocol::StatsRequest{})); }

protocol::HealthResult Client::Health() { return AsHealthResult(impl_->Call(protocol::HealthRequest{})); }

uint64_t Client::Send(protocol::RequestBody body) { return impl_->SendOn(body, /*sync=*/false); }

std::optional<Reply> Client::Recv(double timeout_s) { return impl_->Recv(timeout_s); }

std::size_t Client::outstanding() const { return impl_->async_outstanding + impl_->ready.size(); }

uint64_t Client::stray_replies() const { return impl_->stray; }

const ClientOptions& Client::options() const { return impl_->options; }

}  // namespace kernelgym::client
