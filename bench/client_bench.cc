// The C++ client's sync step round trip against a running server with the null backend: the
// figure the Python client's benchmark (python/bench/bench_client.py) compares itself with, in
// the same run against the same server.
//
//   kernelgym_bench_client --connect tcp://127.0.0.1:5555 -n 20000
//
// An env (null backend; a new one every 10,000 steps, the server's step limit), reset, then
// `warmup` + `n` sync Step()s, each replacing the source
// with one of two alternating sources (after the first two, the unchanged-evaluation path: a
// no-op step); each round trip timed around Client::Step. Prints one JSON object:
// {"client": "c++", "n", "p50_us", "p99_us", "mean_us"}.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "env/client/client.h"

namespace {

constexpr int64_t kStepsPerEnv = 10000;  // the server's default limit on max_steps

double Percentile(std::vector<double> sorted, double p) {
  return sorted.empty() ? 0 : sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelgym_bench_client: the C++ client's sync no-op step round trip (null backend)"};
  std::string endpoint = "tcp://127.0.0.1:5555", task = "cpu/softmax_rows";
  int n = 20000, warmup = 2000;
  app.add_option("--connect", endpoint, "the server's client endpoint (serve --null-backend)")->capture_default_str();
  app.add_option("--task", task, "task id")->capture_default_str();
  app.add_option("-n", n, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  using namespace kernelgym;
  using Clock = std::chrono::steady_clock;
  try {
    client::Client c({.endpoint = endpoint, .request_timeout_s = 30});
    protocol::EnvMakeRequest make;
    make.task = task;
    make.backend = "null";
    make.max_steps = kStepsPerEnv;
    std::string env;
    int64_t steps_left = 0;
    const protocol::Action sources[2] = {protocol::ReplaceAction{"// a\n"}, protocol::ReplaceAction{"// b\n"}};
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < warmup + n; ++i) {
      if (steps_left == 0) {  // a fresh env when the step limit is near (untimed)
        if (!env.empty()) c.Close(env);
        env = c.Make(make).env;
        c.Reset(env, 1);
        steps_left = kStepsPerEnv;
      }
      const auto t0 = Clock::now();
      c.Step(env, sources[i % 2]);
      if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      --steps_left;
    }
    c.Close(env);
    const double mean = std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
    std::sort(us.begin(), us.end());
    std::cout << nlohmann::json{{"client", "c++"}, {"n", n}, {"p50_us", Percentile(us, 0.5)},
                                {"p99_us", Percentile(us, 0.99)}, {"mean_us", mean}}.dump()
              << "\n";
  } catch (const client::ClientError& e) {
    std::cerr << "kernelgym_bench_client: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
