#include "tpu_runner/host/runner_host.h"

#include <spdlog/spdlog.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <zmq.hpp>

#include "core/subprocess.h"
#include "datasets/suite.h"
#include "env/protocol/messages.h"
#include "env/protocol/runner_messages.h"
#include "env/security/curve_socket.h"
#include "env/security/handshake_watch.h"
#include "tpu_runner/machine.h"

namespace kernelgym {
namespace {

namespace runner = protocol::runner;
using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Enough of a digest to tell two copies apart in a message (the full one is in the job).
std::string Abbreviated(const std::string& digest) {
  return digest.empty() ? "none" : digest.substr(0, 16);
}

EvalResult InternalError(const runner::Job& job, std::string message) {
  EvalResult r;
  r.task_id = job.task;
  r.backend = job.backend;
  r.status = Status::kInternalError;
  r.stage = Stage::kStaticCheck;
  r.message = std::move(message);
  return r;
}

// The encoded `result` message, within the protocol's size limit: a result too large to send
// (raw samples of a very long timing run) goes without its samples, and says so.
// It names its job as the job named itself (id, server instance, task digest), so that a server
// that is not the job's never credits it to a job of its own.
std::string EncodeResult(const runner::Job& job, EvalResult result) {
  std::string bytes =
      runner::Encode(runner::FromRunner{runner::JobDone{job.job_id, job.instance, job.task_digest, result}});
  if (bytes.size() <= protocol::kMaxMessageBytes || !result.timing) return bytes;
  const std::size_t samples = result.timing->samples.size();
  result.timing->samples.clear();
  result.details.push_back("the " + std::to_string(samples) +
                           " raw timing samples were dropped: the result exceeded the " +
                           std::to_string(protocol::kMaxMessageBytes) + "-byte message limit");
  return runner::Encode(
      runner::FromRunner{runner::JobDone{job.job_id, job.instance, job.task_digest, std::move(result)}});
}

EvalOptions ToEvalOptions(const runner::JobOptions& o) {
  EvalOptions options;
  options.seeds = o.seeds;
  options.timing_seed = o.timing_seed;
  options.run_timing = o.run_timing;
  options.timing.budget_seconds = o.timing_budget_s;
  options.timing.min_rounds = o.min_rounds;
  options.timing.target_relative_ci = o.target_relative_ci;
  return options;
}

// Jobs waiting for a worker. Shared by the host thread (pushes, closes) and the workers (pop).
class JobQueue {
 public:
  void Push(runner::Job job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }
  // Blocks until a job or Close(); nullopt once closed.
  std::optional<runner::Job> Pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (closed_) return std::nullopt;
    runner::Job job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
  }
  // Stops the workers after their current job; returns the jobs that never started.
  std::deque<runner::Job> Close() {
    std::deque<runner::Job> left;
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      left.swap(jobs_);
    }
    ready_.notify_all();
    return left;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<runner::Job> jobs_;  // guarded by mutex_
  bool closed_ = false;           // guarded by mutex_
};

class RunnerHost {
 public:
  RunnerHost(const RunnerHostOptions& options, const std::atomic<bool>& stop)
      : options_(options),
        stop_(stop),
        tasks_(TaskRegistry::LoadFrom(options.suites_root.empty() ? DefaultSuitesRoot() : options.suites_root)),
        interval_(HeartbeatInterval(options.heartbeat_interval_s)),
        results_endpoint_("inproc://runner-host-results-" + std::to_string(reinterpret_cast<uintptr_t>(this))) {
    hello_.runner_id = options.runner_id.empty() ? DefaultRunnerId() : options.runner_id;
    hello_.backends = options.backends;
    // Each backend as this build describes it: the server passes it on in its own hello, so that
    // clients talk about a runner's backend the way the runner's build does.
    for (const std::string& name : hello_.backends) {
      hello_.backend_info.push_back(BackendInfoOr(name));
      hello_.backend_info.back().name = name;
    }
    hello_.fingerprint = HostFingerprint(options.backend_config.cache_dir);
    hello_.slots = options.slots;
    hello_.pid = getpid();
    for (const std::string& e : tasks_.errors()) spdlog::warn("task not loaded: {}", e);
  }

  int Run() {
    results_ = zmq::socket_t(context_, zmq::socket_type::pull);
    results_.bind(results_endpoint_);
    Connect();  // throws on a malformed endpoint, before any worker exists
    for (int i = 0; i < options_.slots; ++i) workers_.emplace_back([this] { Work(); });
    int code = 1;
    try {
      code = Loop();
    } catch (const std::exception& e) {
      spdlog::error("runner: {}", e.what());
    }
    queue_.Close();
    for (std::thread& w : workers_) w.join();
    return code;
  }

 private:
  // Runs on the host thread until stopped and drained (0) or the transport fails (1).
  int Loop() {
    Clock::time_point next_heartbeat = Clock::now() + Seconds(interval_);
    bool stopping = false;
    for (;;) {
      if (stop_.load() && !stopping) {
        stopping = true;
        const std::size_t dropped = queue_.Close().size();
        busy_ -= static_cast<int>(dropped);
        spdlog::info("stopping: finishing {} job(s) in progress{}", busy_,
                     dropped ? ", dropping " + std::to_string(dropped) + " not started" : "");
      }
      if (stopping && busy_ == 0) {
        // Let the last results leave before the socket closes (linger 0 would drop them).
        dealer_.set(zmq::sockopt::linger, 2000);
        dealer_.close();
        spdlog::info("stopped");
        return 0;
      }
      Clock::time_point now = Clock::now();
      if (now >= next_heartbeat) {
        Send(runner::Heartbeat{busy_});
        next_heartbeat = now + Seconds(interval_);
      }
      if (now - last_heard_ >= Seconds(options_.server_silence_s)) {
        spdlog::warn("nothing heard from {} for {:.1f} s: reconnecting", options_.endpoint, options_.server_silence_s);
        Connect();
        now = Clock::now();
      }
      const Clock::time_point wake = std::min({next_heartbeat, last_heard_ + Seconds(options_.server_silence_s),
                                               now + std::chrono::milliseconds(100)});  // stop_ is polled
      const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      zmq_pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0}, {results_.handle(), 0, ZMQ_POLLIN, 0},
                                watch_->pollitem()};
      if (zmq_poll(items, 3, static_cast<long>(std::max<long long>(timeout, 0) + 1)) < 0) {
        if (zmq_errno() == EINTR) continue;  // a signal: stop_ is checked at the top
        spdlog::error("zmq_poll: {}", zmq_strerror(zmq_errno()));
        return 1;
      }
      if (items[2].revents & ZMQ_POLLIN)
        if (std::optional<std::string> refused = watch_->Check()) {
          // Retrying cannot help a refused key or a mechanism mismatch: say so and stop.
          spdlog::error("runner: {}", *refused);
          return 2;
        }
      if (items[0].revents & ZMQ_POLLIN)
        while (std::optional<std::string> bytes = Receive(dealer_)) HandleServerMessage(*bytes, stopping);
      if (items[1].revents & ZMQ_POLLIN)
        while (std::optional<std::string> bytes = Receive(results_)) {
          SendBytes(*bytes);
          --busy_;
        }
    }
  }

  // Acks answer heartbeats, and they are what tells a live server from a silent one: at least
  // three heartbeats per silence period, whatever the server asks for.
  double HeartbeatInterval(double wanted) const { return std::min(wanted, options_.server_silence_s / 3); }

  // A new DEALER (the old one, if any, is dropped with whatever it still queued) and a hello.
  void Connect() {
    if (dealer_) dealer_.close();
    dealer_ = zmq::socket_t(context_, zmq::socket_type::dealer);
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::reconnect_ivl, 100);       // first retry after 100 ms,
    dealer_.set(zmq::sockopt::reconnect_ivl_max, 2000);  // backing off to 2 s
    try {
      if (options_.curve) security::ApplyCurveClient(dealer_, *options_.curve);
      watch_.emplace(context_, dealer_, options_.endpoint, options_.curve.has_value());
      dealer_.connect(options_.endpoint);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot connect to '" + options_.endpoint + "': " + e.what());
    }
    last_heard_ = Clock::now();
    Send(hello_);
    spdlog::info("runner {} connecting to {} (backends: {})", hello_.runner_id, options_.endpoint,
                 Join(hello_.backends));
  }

  void HandleServerMessage(const std::string& bytes, bool stopping) {
    std::string problem;
    std::optional<runner::ToRunner> message = runner::DecodeToRunner(bytes, problem);
    if (!message) {
      spdlog::warn("ignoring a message from the server: {}", problem);
      return;
    }
    last_heard_ = Clock::now();
    WriteHealthFile();
    std::visit(
        [&](auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, runner::Welcome>) {
            interval_ = HeartbeatInterval(m.heartbeat_interval_s);
            spdlog::info("welcomed by the server; heartbeat every {} s", interval_);
          } else if constexpr (std::is_same_v<M, runner::Reregister>) {
            spdlog::info("the server asks for a new hello");
            Send(hello_);
          } else if constexpr (std::is_same_v<M, runner::Job>) {
            if (stopping) {
              spdlog::warn("job {} arrived while stopping: not started", m.job_id);
              return;
            }
            Accept(std::move(m));
          }
        },
        *message);
  }

  // A job the runner cannot evaluate is answered at once with internal_error; the rest queue.
  void Accept(runner::Job job) {
    std::string refusal;
    if (std::find(options_.backends.begin(), options_.backends.end(), job.backend) == options_.backends.end())
      refusal = "this runner has no backend '" + job.backend + "' (it serves: " + Join(options_.backends) + ")";
    else if (const Task* task = tasks_.Find(job.task); !task)
      refusal = "this runner has no task '" + job.task + "' in its suites";
    else if (task->digest != job.task_digest)
      refusal = "task '" + job.task + "' differs between the server (digest " + Abbreviated(job.task_digest) +
                ") and this runner (digest " + Abbreviated(task->digest) + ", " + task->dir.string() +
                "): its shapes, tolerances or reference may differ, so this runner will not judge it; give both "
                "the same suites";
    if (!refusal.empty()) {
      spdlog::warn("job {}: {}", job.job_id, refusal);
      SendBytes(EncodeResult(job, InternalError(job, refusal)));
      return;
    }
    spdlog::debug("job {}: {} on {}", job.job_id, job.task, job.backend);
    ++busy_;
    queue_.Push(std::move(job));
  }

  // One worker: owns its backends (one per name, created on first use) and its result socket.
  void Work() {
    zmq::socket_t out(context_, zmq::socket_type::push);
    out.set(zmq::sockopt::linger, 1000);
    out.connect(results_endpoint_);
    std::map<std::string, std::unique_ptr<Backend>> backends;
    while (std::optional<runner::Job> job = queue_.Pop()) {
      const EvalResult result = Evaluate(*job, backends);
      spdlog::debug("job {}: {} ({})", job->job_id, StatusName(result.status), result.message);
      const std::string bytes = EncodeResult(*job, result);
      try {
        out.send(zmq::buffer(bytes));
      } catch (const zmq::error_t& e) {  // the context is going away: nobody is left to tell
        spdlog::error("job {}: result not handed back: {}", job->job_id, e.what());
      }
    }
  }

  EvalResult Evaluate(const runner::Job& job, std::map<std::string, std::unique_ptr<Backend>>& backends) const {
    const Task* task = tasks_.Find(job.task);
    if (!task) return InternalError(job, "this runner has no task '" + job.task + "'");
    std::unique_ptr<Backend>& backend = backends[job.backend];
    if (!backend) backend = BackendRegistry::Global().Create(job.backend, options_.backend_config);
    if (!backend) return InternalError(job, "backend '" + job.backend + "' is not registered in this runner");
    try {
      return backend->Evaluate(*task, job.source, ToEvalOptions(job.options));
    } catch (const std::exception& e) {  // a backend bug: reported, the runner keeps serving
      return InternalError(job, "backend '" + job.backend + "' failed: " + e.what());
    }
  }

  // The liveness file (RunnerHostOptions::health_file): written beside itself and renamed over,
  // so a probe never reads half of it. A failure is logged once per streak, never fatal.
  void WriteHealthFile() {
    if (options_.health_file.empty() || Clock::now() - last_health_write_ < std::chrono::seconds(1)) return;
    last_health_write_ = Clock::now();
    const std::filesystem::path tmp = options_.health_file.string() + ".tmp";
    const double now_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    bool ok = static_cast<bool>(std::ofstream(tmp) << nlohmann::json{{"runner_id", hello_.runner_id},
                                                                     {"endpoint", options_.endpoint},
                                                                     {"busy", busy_},
                                                                     {"heard_unix_s", now_s}}
                                                          .dump()
                                                   << "\n");
    std::error_code error;
    if (ok) std::filesystem::rename(tmp, options_.health_file, error);
    ok = ok && !error;
    if (!ok && health_file_ok_) spdlog::warn("cannot write the health file {}", options_.health_file.string());
    health_file_ok_ = ok;
  }

  void Send(const runner::FromRunner& message) { SendBytes(runner::Encode(message)); }

  void SendBytes(const std::string& bytes) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      try {
        // Without a connection the DEALER queues (up to its high-water mark); when even that is
        // full the message is dropped: the server re-queues what it does not hear about.
        if (!dealer_.send(zmq::buffer(bytes), zmq::send_flags::dontwait))
          spdlog::warn("send queue full: message dropped");
        return;
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) {
          spdlog::error("send: {}", e.what());
          return;
        }
      }
    }
  }

  // One protocol message (one frame; of a multi-part message, the last frame), or nullopt when
  // nothing is waiting.
  static std::optional<std::string> Receive(zmq::socket_t& socket) {
    std::optional<std::string> last;
    for (;;) {
      zmq::message_t frame;
      try {
        if (!socket.recv(frame, zmq::recv_flags::dontwait)) return last;
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        spdlog::error("recv: {}", e.what());
        return last;
      }
      last = frame.to_string();
      if (!frame.more()) return last;
    }
  }

  static std::string Join(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  const RunnerHostOptions& options_;
  const std::atomic<bool>& stop_;
  const TaskRegistry tasks_;  // read-only after construction: shared by the workers
  runner::RunnerHello hello_;
  zmq::context_t context_;
  JobQueue queue_;
  std::vector<std::thread> workers_;
  // Host thread only:
  zmq::socket_t dealer_;
  std::optional<security::HandshakeWatch> watch_;  // dealer_'s handshakes
  zmq::socket_t results_;
  double interval_;
  int busy_ = 0;  // jobs accepted and not yet answered
  Clock::time_point last_heard_;
  Clock::time_point last_health_write_{};
  bool health_file_ok_ = true;
  std::string results_endpoint_;
};

std::string ReadCpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      std::string model = line.substr(line.find(':') + 1);
      model.erase(0, model.find_first_not_of(" \t"));
      return model;
    }
  return "unknown";
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace

std::string DefaultRunnerId() {
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(random()));
  return HostName() + ":" + std::to_string(getpid()) + ":" + suffix;
}

std::map<std::string, std::string> HostFingerprint(const std::filesystem::path& cache_dir) {
  std::map<std::string, std::string> f;
  f["host"] = HostName();
  f["cpu_model"] = ReadCpuModel();
  f["cores"] = std::to_string(OnlineCpus());
  f["machine"] = MachineFingerprint();
  utsname uts{};
  if (uname(&uts) == 0) f["kernel"] = std::string(uts.sysname) + " " + uts.release;
  SpawnOptions gxx;
  gxx.argv = {"/usr/bin/g++", "--version"};
  gxx.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  const ProcessResult version = RunProcess(gxx, 10);
  f["compiler"] = version.ok() ? HeadLines(version.stdout_text, 1) : "unavailable (" + version.Describe(10) + ")";
  // Peaks only when already measured: measuring takes seconds and belongs under the timing lock.
  std::ifstream peaks(cache_dir / ("peaks-" + MachineFingerprint() + ".json"));
  if (peaks) {
    try {
      const nlohmann::json j = nlohmann::json::parse(peaks);
      for (const char* key : {"peak_gflops", "peak_gbps", "dram_gbps"})
        if (j.contains(key) && j[key].is_number()) f[key] = std::to_string(j[key].get<double>());
    } catch (const nlohmann::json::exception&) {
    }
  }
  return f;
}

int RunRunnerHost(const RunnerHostOptions& options, const std::atomic<bool>& stop) {
  if (options.endpoint.empty()) {
    spdlog::error("runner: no server endpoint to connect to");
    return 2;
  }
  if (options.slots < 1 || options.heartbeat_interval_s <= 0 || options.server_silence_s <= 0) {
    spdlog::error("runner: slots must be >= 1 and the heartbeat interval and server silence > 0");
    return 2;
  }
  if (options.backends.empty()) {
    spdlog::error("runner: no backend to serve");
    return 2;
  }
  const std::vector<std::string> registered = BackendRegistry::Global().Names();
  for (const std::string& b : options.backends)
    if (std::find(registered.begin(), registered.end(), b) == registered.end()) {
      spdlog::error("runner: unknown backend '{}'", b);
      return 2;
    }
  try {
    RunnerHost host(options, stop);
    return host.Run();
  } catch (const std::exception& e) {  // e.g. a malformed endpoint: said once, not thrown
    spdlog::error("runner: {}", e.what());
    return 1;
  }
}

}  // namespace kernelgym
