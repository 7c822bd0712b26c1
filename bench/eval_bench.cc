// End-to-end benchmark of one evaluation on the cpu backend: latency per stage, and how
// repeatable the speedup is across separate evaluations (separate harness processes).
//
//   build/bench/kernelgym_bench_eval [--task cpu/softmax_rows] [--kernel tests/honest/softmax_rows_avx2/kernel.cpp]
//                                    [--repeats 10] [--think-ms 0]
//
// Prints a Markdown table (the form docs/benchmarks.md quotes) and, with --json, one JSON object.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <thread>

#include "datasets/suite.h"
#include "tpu_runner/cpu/compiler.h"
#include "tpu_runner/machine.h"
#include "tpu_runner/runner_config.h"
#include "tpu_runner/cpu/static_check.h"
#include "tpu_runner/cpu/symbol_policy.h"
#include "tpu_runner/timing_stats.h"

namespace {

using namespace kernelgym;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Series {
  std::vector<double> values;
  double Median() const { return Percentile(values, 0.5); }
  double P90() const { return Percentile(values, 0.9); }
  double Min() const { return values.empty() ? 0 : *std::min_element(values.begin(), values.end()); }
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelgym evaluation benchmark"};
  std::string task_id = "cpu/softmax_rows", kernel_path = "tests/honest/softmax_rows_avx2/kernel.cpp";
  int repeats = 10;
  double budget = 1.0;
  bool as_json = false;
  app.add_option("--task", task_id)->capture_default_str();
  app.add_option("--kernel", kernel_path)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--timing-budget-s", budget, "timing budget per evaluation (s)")->capture_default_str();
  double think_ms = 0;
  app.add_option("--think-ms", think_ms,
                 "pause between whole evaluations, as a policy thinking (lets the next harness start meanwhile)")
      ->capture_default_str();
  app.add_flag("--json", as_json);
  CLI11_PARSE(app, argc, argv);

  const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  const Task* task = registry.Find(task_id);
  if (!task) {
    std::cerr << "unknown task " << task_id << "\n";
    return 2;
  }
  const std::string source = ReadText(kernel_path);
  if (source.empty()) {
    std::cerr << "cannot read " << kernel_path << "\n";
    return 2;
  }
  BackendConfig config = DefaultBackendConfig();
  // A private cache, so "cold" means cold.
  config.cache_dir = (std::filesystem::temp_directory_path() / ("kernelgym-bench-" + std::to_string(getpid()))).string();
  RegisterBuiltinBackends();
  std::unique_ptr<Backend> backend = BackendRegistry::Global().Create("cpu", config);
  Compiler compiler(CompilerConfig{.cache_dir = config.cache_dir});

  // Build the precompiled header (once per machine and flag set) outside the measurements.
  if (compiler.Compile(source + "\n// bench warm-up\n", *task).status != Status::kOk) {
    std::cerr << "warm-up compile failed\n";
    return 1;
  }
  std::map<std::string, Series> stage;
  // Static check, cold and cached compile, symbol check: each `repeats` times.
  for (int i = 0; i < repeats; ++i) {
    const std::string variant = source + "\n// bench variant " + std::to_string(i) + "\n";  // new cache key
    auto t = Clock::now();
    (void)CheckSource(variant, task->policy);
    stage["static check"].values.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    const CompileResult cold = compiler.Compile(variant, *task);
    stage["compile, cold"].values.push_back(Ms(Clock::now() - t));
    if (cold.status != Status::kOk || cold.cached) {
      std::cerr << "cold compile failed or was cached: " << cold.message << "\n";
      return 1;
    }
    t = Clock::now();
    const CompileResult warm = compiler.Compile(variant, *task);
    stage["compile, cached"].values.push_back(Ms(Clock::now() - t));
    if (!warm.cached) {
      std::cerr << "second compile missed the cache\n";
      return 1;
    }
    t = Clock::now();
    (void)CheckSymbolPolicy(warm.shared_object, task->policy);
    stage["symbol check"].values.push_back(Ms(Clock::now() - t));
  }

  // Whole evaluations of the same kernel (compile cached after the first): latency and speedup.
  std::vector<double> speedups;
  EvalOptions options;
  options.timing.budget_seconds = budget;
  for (int i = 0; i < repeats + 1; ++i) {
    if (think_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(think_ms));
    const auto t = Clock::now();
    const EvalResult r = backend->Evaluate(*task, source, options);
    const double total = Ms(Clock::now() - t);
    if (r.status != Status::kOk || !r.timing) {
      std::cerr << "evaluation " << i << " failed: " << StatusName(r.status) << ": " << r.message << "\n";
      for (const std::string& d : r.details) std::cerr << "  " << d << "\n";
      return 1;
    }
    if (i == 0) continue;  // the first one measures the machine's peaks and warms the compile cache
    stage["harness start + reference setup"].values.push_back(
        (r.stage_seconds.at("harness") - r.stage_seconds.at("correctness") - r.stage_seconds.at("timing")) * 1e3);
    stage["correctness (3 trials + repeat)"].values.push_back(r.stage_seconds.at("correctness") * 1e3);
    stage["timing"].values.push_back(r.stage_seconds.at("timing") * 1e3);
    stage["whole evaluation"].values.push_back(total);
    speedups.push_back(r.timing->speedup);
  }
  std::error_code ec;
  std::filesystem::remove_all(config.cache_dir, ec);

  const double mean = std::accumulate(speedups.begin(), speedups.end(), 0.0) / speedups.size();
  double var = 0;
  for (double s : speedups) var += (s - mean) * (s - mean);
  const double cv = std::sqrt(var / (speedups.size() - 1)) / mean;

  if (as_json) {
    nlohmann::json j{{"task", task_id}, {"kernel", kernel_path}, {"repeats", repeats}, {"speedups", speedups},
                     {"speedup_cv", cv}, {"fingerprint", MachineFingerprint()}};
    for (const auto& [name, s] : stage) j["stages_ms"][name] = {{"median", s.Median()}, {"p90", s.P90()}, {"min", s.Min()}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("task %s, kernel %s, %d repeats, machine %s\n\n", task_id.c_str(), kernel_path.c_str(), repeats,
              MachineFingerprint().c_str());
  std::printf("| stage | median ms | p90 ms | min ms |\n|---|---|---|---|\n");
  for (const char* name : {"static check", "compile, cold", "compile, cached", "symbol check",
                           "harness start + reference setup", "correctness (3 trials + repeat)", "timing",
                           "whole evaluation"}) {
    const Series& s = stage[name];
    std::printf("| %s | %.2f | %.2f | %.2f |\n", name, s.Median(), s.P90(), s.Min());
  }
  std::printf("\nspeedup over %zu evaluations: mean %.3fx, min %.3f, max %.3f, CV %.2f%%\n", speedups.size(), mean,
              *std::min_element(speedups.begin(), speedups.end()), *std::max_element(speedups.begin(), speedups.end()),
              cv * 100);
  return 0;
}
