// Server overhead and scale, side by side with a raw ZeroMQ ping-pong in the same run.
//
//   kernelgym_bench_server                 # null backend: latency, throughput, 1000 sessions
//   kernelgym_bench_server --e2e --runners 2 --seconds 30   # cpu backend end to end
//
// The server is the real `kernelgym serve` process; the ping-pong is a ROUTER echo in a child
// process that answers every request with a reply of the same size as the server's step reply,
// so both paths move the same bytes through the same sockets; the difference is the server.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "env/protocol/codec.h"

namespace {

using namespace kernelgym;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- the processes under test ----

pid_t StartServer(const std::vector<std::string>& flags, const std::filesystem::path& dir, std::string& endpoint) {
  std::filesystem::create_directories(dir);
  const auto endpoint_file = dir / "endpoints.json";
  std::filesystem::remove(endpoint_file);
  std::vector<std::string> argv{KERNELGYM_CLI, "serve", "--bind", "tcp://127.0.0.1:*", "--runner-bind",
                                "tcp://127.0.0.1:*", "--endpoint-file", endpoint_file.string(), "--record-dir",
                                (dir / "store").string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string log = (dir / "server.log").string();
    if (!freopen(log.c_str(), "w", stderr)) _exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  for (int i = 0; i < 3000 && !std::filesystem::exists(endpoint_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  endpoint = json::parse(ReadFile(endpoint_file)).at("clients");
  return pid;
}

void Stop(pid_t pid) {
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

// A ROUTER that answers every message with `reply_size` bytes. Forked before this process makes
// any ZeroMQ context (a context does not survive fork).
pid_t StartEcho(std::size_t reply_size, std::string& endpoint) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    close(fds[0]);
    zmq::context_t context(1);
    zmq::socket_t router(context, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:*");
    const std::string bound = router.get(zmq::sockopt::last_endpoint) + "\n";
    if (write(fds[1], bound.data(), bound.size()) < 0) _exit(1);
    close(fds[1]);
    const std::string reply(reply_size, 'r');
    while (true) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(router, std::back_inserter(frames))) continue;
      std::array<zmq::const_buffer, 2> out{zmq::buffer(frames[0].data(), frames[0].size()), zmq::buffer(reply)};
      zmq::send_multipart(router, out);
    }
  }
  close(fds[1]);
  char buf[256] = {};
  const ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  endpoint = std::string(buf, n > 0 ? static_cast<std::size_t>(n) - 1 : 0);
  return pid;
}

// ---- a minimal client: pre-encoded requests, raw sockets, the same code for both targets ----

class Raw {
 public:
  Raw(zmq::context_t& context, const std::string& endpoint) : socket_(context, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, 0);
    socket_.set(zmq::sockopt::rcvhwm, 0);
    socket_.connect(endpoint);
  }
  void Send(const std::string& bytes) { socket_.send(zmq::buffer(bytes), zmq::send_flags::none); }
  std::string Recv() {
    zmq::message_t m;
    (void)socket_.recv(m);
    return m.to_string();
  }
  // A request and its decoded reply (set-up calls).
  protocol::DecodedReply Call(const protocol::RequestBody& body) {
    Send(protocol::EncodeRequest({protocol::kVersion, ++id_, body}));
    return protocol::DecodeReply(Recv());
  }
  json CallResult(const protocol::RequestBody& body) {
    protocol::DecodedReply r = Call(body);
    if (!r.ok) throw std::runtime_error("set-up call failed: " + r.error.message);
    std::string problem;
    return *protocol::DecodeResultTree(r.result, problem);
  }

 private:
  zmq::socket_t socket_;
  uint64_t id_ = 1000000;
};

struct Latency {
  double p50_us, p99_us, mean_us;
};

Latency PingPong(Raw& raw, const std::vector<std::string>& requests, int n) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    raw.Send(requests[static_cast<std::size_t>(i) % requests.size()]);
    raw.Recv();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return {Percentile(us, 0.5), Percentile(us, 0.99), std::accumulate(us.begin(), us.end(), 0.0) / n};
}

// Keeps `in_flight` requests outstanding (request k % requests.size() is re-sent when its reply
// comes back); returns round trips per second over `seconds`.
double Pipelined(Raw& raw, const std::vector<std::string>& requests, int in_flight, double seconds) {
  for (int i = 0; i < in_flight; ++i) raw.Send(requests[static_cast<std::size_t>(i) % requests.size()]);
  uint64_t done = 0;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::size_t next = static_cast<std::size_t>(in_flight);
  while (Clock::now() < end) {
    raw.Recv();
    ++done;
    raw.Send(requests[next++ % requests.size()]);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < in_flight; ++i) raw.Recv();
  return static_cast<double>(done) / elapsed;
}

std::string StepRequest(const std::string& env, uint64_t id, const std::string& source) {
  return protocol::EncodeRequest({protocol::kVersion, id, protocol::EnvStepRequest{env, protocol::ReplaceAction{source}}});
}

int NullBench(const std::filesystem::path& dir, int latency_n, double seconds) {
  // The step reply's size decides the echo's reply size: measure it against a throwaway server.
  std::string endpoint;
  std::size_t reply_size = 0;
  {
    const pid_t probe = StartServer({"--local-runners", "0", "--null-backend"}, dir / "probe", endpoint);
    {
      zmq::context_t context(1);
      Raw raw(context, endpoint);
      const std::string env = raw.CallResult(protocol::EnvMakeRequest{"cpu/softmax_rows", "null"})["env"];
      raw.CallResult(protocol::EnvResetRequest{env, 1});
      raw.Send(StepRequest(env, 1, "// a\n"));
      reply_size = raw.Recv().size();
    }
    Stop(probe);
  }
  std::string echo_endpoint;
  const pid_t echo = StartEcho(reply_size, echo_endpoint);
  const pid_t server = StartServer({"--local-runners", "0", "--null-backend", "--max-sessions", "200000"}, dir / "null",
                                   endpoint);
  json out;
  {
    zmq::context_t context(1);
    Raw to_server(context, endpoint), to_echo(context, echo_endpoint);

    // 64 envs; each request steps its own env, alternating between two sources so that every
    // step is a real (null) evaluation, never the unchanged-source shortcut.
    std::vector<std::string> envs;
    for (int i = 0; i < 64; ++i) {
      envs.push_back(to_server.CallResult(protocol::EnvMakeRequest{"cpu/softmax_rows", "null", "log_speedup_gain", json::object(), 10000})["env"]);
      to_server.CallResult(protocol::EnvResetRequest{envs.back(), 1});
    }
    std::vector<std::string> single, many;
    for (int k = 0; k < 2; ++k) single.push_back(StepRequest(envs[0], 1, k ? "// b\n" : "// a\n"));
    for (int k = 0; k < 2; ++k)
      for (const std::string& env : envs) many.push_back(StepRequest(env, 1, k ? "// b\n" : "// a\n"));
    const std::size_t request_size = single[0].size();

    PingPong(to_echo, single, 2000);  // warm-up
    PingPong(to_server, single, 2000);
    const Latency raw_latency = PingPong(to_echo, single, latency_n);
    const Latency server_latency = PingPong(to_server, single, latency_n);
    const double raw_1 = Pipelined(to_echo, single, 1, seconds);
    const double server_1 = Pipelined(to_server, single, 1, seconds);
    const double raw_64 = Pipelined(to_echo, many, 64, seconds);
    const double server_64 = Pipelined(to_server, many, 64, seconds);

    // 1000 more sessions, made and reset, then left idle.
    const json before = to_server.CallResult(protocol::StatsRequest{});
    for (int i = 0; i < 1000; ++i) {
      const std::string env = to_server.CallResult(protocol::EnvMakeRequest{"cpu/softmax_rows", "null"})["env"];
      to_server.CallResult(protocol::EnvResetRequest{env, 1});
    }
    const json after = to_server.CallResult(protocol::StatsRequest{});
    const double rss_per_session =
        (after["rss_bytes"].get<double>() - before["rss_bytes"].get<double>()) / 1000.0;

    out = {{"request_bytes", request_size},
           {"reply_bytes", reply_size},
           {"latency_us",
            {{"raw_p50", raw_latency.p50_us},
             {"raw_p99", raw_latency.p99_us},
             {"server_p50", server_latency.p50_us},
             {"server_p99", server_latency.p99_us},
             {"p50_ratio", server_latency.p50_us / raw_latency.p50_us}}},
           {"throughput_per_s",
            {{"raw_1", raw_1}, {"server_1", server_1}, {"raw_64", raw_64}, {"server_64", server_64}}},
           {"sessions",
            {{"before", before["sessions"]},
             {"after", after["sessions"]},
             {"rss_bytes_per_idle_session", rss_per_session},
             {"approx_session_bytes_per_session",
              (after["session_bytes"].get<double>() - before["session_bytes"].get<double>()) / 1000.0},
             {"open_fds_before", before["open_fds"]},
             {"open_fds_after", after["open_fds"]}}}};
  }
  Stop(server);
  kill(echo, SIGKILL);
  waitpid(echo, nullptr, 0);
  std::cout << out.dump(2) << "\n";
  return 0;
}

// End to end on the cpu backend: `envs` envs step concurrently, each step a new source (the
// improved kernel with a step comment appended, so nothing is cached or re-used).
int EndToEnd(const std::filesystem::path& dir, int runners, int envs_n, double seconds, const std::string& kernel) {
  std::string endpoint;
  const pid_t server = StartServer({"--local-runners", std::to_string(runners)}, dir / ("e2e" + std::to_string(runners)),
                                   endpoint);
  json out;
  {
    zmq::context_t context(1);
    Raw raw(context, endpoint);
    const std::string source = ReadFile(kernel);
    std::vector<std::string> envs;
    for (int i = 0; i < envs_n; ++i) {
      envs.push_back(raw.CallResult(protocol::EnvMakeRequest{"cpu/softmax_rows", "cpu", "log_speedup_gain", json::object(), 10000, 1e9})["env"]);
      raw.CallResult(protocol::EnvResetRequest{envs.back(), 1});
    }
    uint64_t id = 0, steps = 0, ok = 0;
    std::map<uint64_t, std::string> env_of;
    auto send = [&](const std::string& env) {
      env_of[++id] = env;
      raw.Send(StepRequest(env, id, source + "// step " + std::to_string(id) + "\n"));
    };
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (const std::string& env : envs) send(env);
    std::vector<double> latencies;
    while (!env_of.empty()) {
      protocol::DecodedReply r = protocol::DecodeReply(raw.Recv());
      const std::string env = env_of[r.id];
      env_of.erase(r.id);
      ++steps;
      if (r.ok) {
        std::string problem;
        ok += (*protocol::DecodeResultTree(r.result, problem))["observation"]["status"] == "ok";
      }
      if (Clock::now() < end) send(env);
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    out = {{"runners", runners}, {"envs", envs_n}, {"steps", steps}, {"ok", ok}, {"seconds", elapsed},
           {"steps_per_s", static_cast<double>(steps) / elapsed}};
  }
  Stop(server);
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelgym_bench_server: server overhead against a raw ZeroMQ ping-pong, and end-to-end steps/s"};
  bool e2e = false;
  int runners = 1, envs = 2, latency_n = 20000;
  double seconds = 3;
  std::string kernel = std::string(KERNELGYM_SOURCE_DIR) + "/tests/honest/softmax_rows_avx2/kernel.cpp";
  app.add_flag("--e2e", e2e, "end to end on the cpu backend instead of the null backend");
  app.add_option("--runners", runners, "local runners (--e2e)")->capture_default_str();
  app.add_option("--envs", envs, "envs stepping concurrently (--e2e)")->capture_default_str();
  app.add_option("--latency-n", latency_n, "round trips for the latency percentiles")->capture_default_str();
  app.add_option("--seconds", seconds, "seconds per throughput measurement")->capture_default_str();
  app.add_option("--kernel", kernel, "kernel source stepped in --e2e")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const auto dir = std::filesystem::temp_directory_path() / ("kernelgym-bench-server-" + std::to_string(getpid()));
  const int code = e2e ? EndToEnd(dir, runners, envs, seconds, kernel) : NullBench(dir, latency_n, seconds);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return code;
}
