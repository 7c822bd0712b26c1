#include "env/server/server.h"

#include <fcntl.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <zmq_addon.hpp>

#include "core/text_safety.h"
#include "env/protocol/codec.h"
#include "env/server/metrics.h"
#include "env/server/server_loop.h"
#include "rewards/reward.h"

namespace kernelgym::server {
namespace detail {

using nlohmann::json;
using protocol::Error;
using protocol::ErrorCode;

std::string ServerLoop::NewId(const char* prefix) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix, static_cast<unsigned long long>(rng_()));
  return buf;
}

std::string ServerLoop::NewInstanceId() {
  std::random_device random;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04x%08x", static_cast<unsigned>(random()) & 0xffffu,
                static_cast<unsigned>(random()));
  return buf;
}

std::optional<std::string> ServerLoop::InstanceOfEnv(const std::string& env) {
  // "env-" + 12 hex digits + "-" + the rest.
  constexpr std::size_t kPrefix = 4, kInstance = 12;
  if (env.size() <= kPrefix + kInstance + 1 || env.compare(0, kPrefix, "env-") != 0 || env[kPrefix + kInstance] != '-')
    return std::nullopt;
  const std::string instance = env.substr(kPrefix, kInstance);
  if (instance.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  return instance;
}

namespace {

// A client that does not read its replies may have this many waiting in ZeroMQ's queue for its
// connection, and this many more bytes in the server's own outbox for it; past both, further
// replies to it are dropped (stats.undeliverable_replies). Enough for an honest client pipelining
// thousands of steps; a bound on what a client that never reads costs the server.
constexpr int kMaxQueuedRepliesPerClient = 100;
constexpr std::size_t kMaxOutboxBytesPerClient = std::size_t{64} << 20;

enum class Sent { kOk, kQueueFull, kGone };

Sent TrySend(zmq::socket_t& socket, const std::string& identity, const std::string& bytes) {
  try {
    std::array<zmq::const_buffer, 2> frames{zmq::buffer(identity), zmq::buffer(bytes)};
    // ROUTER_MANDATORY: a peer that went away is an error here (EHOSTUNREACH), not a silent drop;
    // a full queue for it is EAGAIN (no value).
    return zmq::send_multipart(socket, frames, zmq::send_flags::dontwait) ? Sent::kOk : Sent::kQueueFull;
  } catch (const zmq::error_t& e) {
    spdlog::debug("reply undeliverable: {}", e.what());
    return Sent::kGone;
  }
}

}  // namespace

void ServerLoop::SendToClient(const std::string& identity, std::string bytes) {
  auto box = outboxes_.find(identity);
  if (box == outboxes_.end()) {
    switch (TrySend(clients_, identity, bytes)) {
      case Sent::kOk:
        return;
      case Sent::kGone:
        ++undeliverable_;
        return;
      case Sent::kQueueFull:
        box = outboxes_.emplace(identity, Outbox{}).first;
        break;
    }
  }
  // Behind an outbox, replies keep their order.
  if (box->second.bytes + bytes.size() > kMaxOutboxBytesPerClient ||
      outbox_bytes_ + bytes.size() > options_.max_outbox_bytes) {
    ++undeliverable_;
    if (box->second.replies.empty()) outboxes_.erase(box);
    return;
  }
  box->second.bytes += bytes.size();
  outbox_bytes_ += bytes.size();
  box->second.replies.push_back(std::move(bytes));
}

void ServerLoop::FlushOutboxes() {
  for (auto it = outboxes_.begin(); it != outboxes_.end();) {
    Outbox& box = it->second;
    while (!box.replies.empty()) {
      const Sent sent = TrySend(clients_, it->first, box.replies.front());
      if (sent == Sent::kQueueFull) break;
      if (sent == Sent::kGone) {
        undeliverable_ += box.replies.size();
        outbox_bytes_ -= box.bytes;
        box.bytes = 0;
        box.replies.clear();
        break;
      }
      box.bytes -= box.replies.front().size();
      outbox_bytes_ -= box.replies.front().size();
      box.replies.pop_front();
    }
    it = box.replies.empty() ? outboxes_.erase(it) : std::next(it);
  }
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

namespace {

// An error message may quote what a client sent (an env id, a task name): it goes out as valid
// UTF-8 and at most kMaxErrorMessageBytes, so that no request can make its error reply huge or
// unreadable for a strict decoder (docs/protocol.md, "Text is UTF-8").
constexpr std::size_t kMaxErrorMessageBytes = 4096;

Error SafeError(Error error) {
  const std::string_view kept = Utf8Prefix(error.message, kMaxErrorMessageBytes);
  error.message = ValidUtf8(kept) + (kept.size() < error.message.size() ? "..." : "");
  for (auto& [key, value] : error.details) value = ValidUtf8(Utf8Prefix(value, kMaxErrorMessageBytes));
  return error;
}

}  // namespace

void ServerLoop::ReplyError(const std::string& client, uint64_t id, ErrorCode code, const std::string& op,
                            std::string message, std::map<std::string, std::string> details) {
  ++errors_by_code_[std::string(protocol::ErrorCodeName(code))];
  if (!op.empty()) details["op"] = op;
  SendToClient(client, protocol::EncodeErrorReply(id, SafeError(Error{code, std::move(message), std::move(details)})));
}

void ServerLoop::Deliver(const std::string& client, std::string reply, std::optional<std::string> record) {
  if (!record) return SendToClient(client, std::move(reply));
  const uint64_t token = next_token_++;
  held_replies_.emplace(token, std::make_pair(client, std::move(reply)));
  recorder_->Submit(token, std::move(*record));
}

void ServerLoop::DeliverDurable() {
  if (!recorder_) return;
  for (uint64_t token : recorder_->TakeDurable()) {
    auto it = held_replies_.find(token);
    if (it == held_replies_.end()) continue;
    SendToClient(it->second.first, std::move(it->second.second));
    held_replies_.erase(it);
  }
  // A record that could not be written must not cost the policy its step: the reply goes out,
  // and the failure shows in the log and in stats (recorder.healthy = false).
  for (const FailedRecord& failed : recorder_->TakeFailed()) {
    spdlog::error("trajectory record lost: {}", failed.error);
    auto it = held_replies_.find(failed.token);
    if (it == held_replies_.end()) continue;
    SendToClient(it->second.first, std::move(it->second.second));
    held_replies_.erase(it);
  }
}

namespace {

// Whether the store's disk takes writes again: 64 KiB (a few records) written and fdatasync'ed to
// a scratch file beside the segments (readers ignore other files), then removed.
bool StoreTakesWrites(const std::filesystem::path& dir) {
  const std::filesystem::path probe = dir / ".write-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::string block(64 << 10, '\n');
  bool ok = true;
  for (std::size_t done = 0; ok && done < block.size();) {
    const ssize_t n = ::write(fd, block.data() + done, block.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && ::fdatasync(fd) == 0;
  ::close(fd);
  ::unlink(probe.c_str());
  return ok;
}

}  // namespace

bool ServerLoop::EnsureRecorder(std::string& error) {
  if (recorder_) {
    if (recorder_->healthy()) return true;
    // The recorder is unhealthy until a later batch is written, but only a recorded step writes
    // one: with no recorded env left, refusing every new one would keep recording off until a
    // restart, however much space was freed. So a probe decides. It blocks the loop for one
    // small write, only while the store is failing and only for a recorded env.make.
    if (StoreTakesWrites(options_.record_dir)) return true;
    error = "the trajectory store is failing: " + recorder_->stats().last_error;
    return false;
  }
  recorder_ = TrajectoryRecorder::Open(options_.record_dir, RecorderOptions{}, error);
  if (!recorder_) return false;
  spdlog::info("recording trajectories to {}", options_.record_dir.string());
  return true;
}

void ServerLoop::OnClientMessage(const std::string& client, std::string_view bytes, const std::string& principal) {
  principal_ = principal;
  protocol::DecodedRequest decoded = protocol::DecodeRequest(bytes);
  // Keyed by the protocol's own op names only (DecodeRequest leaves `op` empty for any other):
  // a counter per op string a client chose would grow without bound.
  ++requests_by_op_[decoded.op.empty() ? "?" : decoded.op];
  if (!decoded.request) {
    ++errors_by_code_[std::string(protocol::ErrorCodeName(decoded.error.code))];
    SendToClient(client, protocol::EncodeErrorReply(decoded.id, SafeError(decoded.error)));
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

void ServerLoop::Tick(Clock::time_point now) {
  std::vector<JobOutcome> done;
  scheduler_.Tick(now, done);
  for (JobOutcome& outcome : done) OnJobDone(std::move(outcome));
  if (local_runners_) local_runners_->Supervise(now);
  if (Seconds(now - last_sweep_) < 1.0) return;
  last_sweep_ = now;
  // Envs whose client went away (or forgot them): closed after the idle timeout.
  const std::size_t sessions_before = sessions_.size();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (!it->second.job_id && Seconds(now - it->second.last_active) > options_.session_idle_timeout_s) {
      spdlog::info("env {} closed after {} s idle", it->first, options_.session_idle_timeout_s);
      quotas_.SessionClosed(it->second.principal);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  // Closed and reaped sessions are freed into malloc's heap, which glibc hands back to the
  // system only from its top: without a trim the server's RSS would stay at its peak (measured:
  // 1,000 reaped sessions of 16 KiB kernels kept 69 MB; trimmed, 1.4 MB). At most once a second.
  if (sessions_.size() < sessions_before || closed_since_trim_ > 0) {
    malloc_trim(0);
    closed_since_trim_ = 0;
  }
  heap_bytes_ = HeapBytes();
}

std::size_t ServerLoop::HeapBytes() {
  // What malloc has handed out and not had back: chunks in use in every arena, and the large
  // blocks it mmapped. Sessions are most of it; the rest is the baseline (heap_bytes_at_start_).
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

void ServerLoop::OnMetricsRequest() {
  // ZMQ_STREAM: [peer id, bytes]; an empty part is a peer connecting or leaving. A scrape's GET
  // fits in one read; the answer goes out whole, then an empty part closes the connection.
  for (int n = 0; n < 64; ++n) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(metrics_, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
    if (frames.size() != 2 || frames[1].size() == 0) continue;
    const std::string response = HttpResponse(frames[1].to_string_view(), PrometheusText(Stats()));
    const std::string peer = frames[0].to_string();
    try {
      metrics_.send(zmq::buffer(peer), zmq::send_flags::sndmore);
      metrics_.send(zmq::buffer(response), zmq::send_flags::dontwait);
      metrics_.send(zmq::buffer(peer), zmq::send_flags::sndmore);
      metrics_.send(zmq::message_t(), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("metrics reply undeliverable: {}", e.what());
    }
  }
}

int ServerLoop::Run(const std::atomic<bool>& stop) {
  // Tasks.
  tasks_ = TaskRegistry::LoadFrom(options_.suites_root);
  for (const std::string& e : tasks_.errors()) spdlog::warn("task not loaded: {}", e);
  for (const Task* task : tasks_.All()) {
    const protocol::TaskInfo info = TaskInfoOf(*task);
    task_info_[task->id] = {protocol::ToWire(info.summary), protocol::ToWire(info)};
  }
  RegisterBuiltinRewards();

  for (zmq::socket_t* s : {&clients_, &runners_}) {
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::router_mandatory, 1);
    // A client's unread replies beyond a few go to its outbox (SendToClient), which is bounded in
    // bytes; runners read everything at once.
    s->set(zmq::sockopt::sndhwm, s == &clients_ ? kMaxQueuedRepliesPerClient : 100000);
    s->set(zmq::sockopt::rcvhwm, 100000);
    // ZeroMQ drops the connection of a peer that sends more than this, without a word; below it,
    // an oversized request (> kMaxMessageBytes) gets a BAD_REQUEST reply from the decoder.
    s->set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
  }
  std::vector<std::string> runner_argv = options_.runner_argv;
  if (!SetUpSecurity(runner_argv)) return 2;
  try {
    clients_.bind(options_.client_endpoint);
    runners_.bind(options_.runner_endpoint);
  } catch (const zmq::error_t& e) {
    spdlog::error("cannot bind {} / {}: {}", options_.client_endpoint, options_.runner_endpoint, e.what());
    return 2;
  }
  if (!options_.metrics_endpoint.empty()) {
    try {
      metrics_ = zmq::socket_t(context_, zmq::socket_type::stream);
      metrics_.set(zmq::sockopt::linger, 0);
      metrics_.bind(options_.metrics_endpoint);
      spdlog::info("metrics on {} (GET /metrics)", metrics_.get(zmq::sockopt::last_endpoint));
    } catch (const zmq::error_t& e) {
      spdlog::error("cannot bind the metrics endpoint {}: {}", options_.metrics_endpoint, e.what());
      return 2;
    }
  }
  const std::string client_endpoint = clients_.get(zmq::sockopt::last_endpoint);
  const std::string runner_endpoint = runners_.get(zmq::sockopt::last_endpoint);
  spdlog::info("serving clients on {}, runners on {}; {} tasks", client_endpoint, runner_endpoint, tasks_.All().size());
  if (!options_.endpoint_file.empty()) {
    const std::filesystem::path tmp = options_.endpoint_file.string() + ".tmp";
    json endpoints{{"clients", client_endpoint}, {"runners", runner_endpoint}, {"pid", getpid()}};
    if (metrics_) endpoints["metrics"] = metrics_.get(zmq::sockopt::last_endpoint);
    std::ofstream(tmp) << endpoints.dump() << "\n";
    std::filesystem::rename(tmp, options_.endpoint_file);  // atomic: readers never see half a file
  }
  if (options_.local_runners > 0 && !runner_argv.empty()) {
    local_runners_ = std::make_unique<LocalRunners>(runner_argv, runner_endpoint, options_.local_runners);
    local_runners_->Start();
  }

  heap_bytes_at_start_ = heap_bytes_ = HeapBytes();
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
      if (pending_.empty() && held_replies_.empty() && patching_.empty()) break;
      if (Clock::now() >= drain_deadline) {
        for (auto& [job_id, pending] : std::unordered_map<uint64_t, Pending>(pending_))
          FailPending(job_id, pending, ErrorCode::kRunnerLost, "the server stopped before this evaluation finished");
        pending_.clear();
        break;
      }
    }

    std::vector<zmq::pollitem_t> items{{clients_.handle(), 0, ZMQ_POLLIN, 0}, {runners_.handle(), 0, ZMQ_POLLIN, 0}};
    items.push_back({nullptr, patch_workers_.notify_fd(), ZMQ_POLLIN, 0});
    if (recorder_) items.push_back({nullptr, recorder_->notify_fd(), ZMQ_POLLIN, 0});
    const std::size_t metrics_item = items.size();
    if (metrics_) items.push_back({metrics_.handle(), 0, ZMQ_POLLIN, 0});
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
        ReplyError(identity, protocol::ScanRequestId(frames.back().to_string_view()), ErrorCode::kBadRequest, "",
                   "a request must be one message part, not " + std::to_string(frames.size() - 1));
        continue;
      }
      // With CURVE the client is its key's name (the ZAP handler's User-Id), shared by all its
      // connections; without, the connection.
      const char* user = curve_ ? zmq_msg_gets(frames[1].handle(), "User-Id") : nullptr;
      OnClientMessage(identity, frames[1].to_string_view(), user && *user ? std::string("key:") + user : identity);
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
    if (items[2].revents & ZMQ_POLLIN) OnPatchesApplied();
    if (metrics_ && (items[metrics_item].revents & ZMQ_POLLIN)) OnMetricsRequest();
    if (recorder_) DeliverDurable();
    FlushOutboxes();
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
  FlushOutboxes();  // what the clients' queues take now; the rest goes with the server
  if (local_runners_) local_runners_->Stop(std::chrono::milliseconds(5000));
  RemoveRunnerKeys();
  spdlog::info("stopped");
  return 0;
}

}  // namespace detail

int RunServer(const ServerOptions& options, const std::atomic<bool>& stop) {
  zmq::context_t context(1);
  int code = 0;
  {
    detail::ServerLoop loop(options, context);
    code = loop.Run(stop);
  }
  context.close();
  return code;
}

}  // namespace kernelgym::server
