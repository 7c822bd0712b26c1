// kernelgym: the command line.
//   kernelgym eval --task cpu/softmax_rows --source my_kernel.cpp [--json]
//   kernelgym tasks [--json]
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "datasets/suite.h"
#include "env/runner_config.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/result_json.h"

namespace {

using namespace kernelgym;

int ListTasks(const TaskRegistry& registry, bool as_json) {
  if (as_json) {
    nlohmann::json list = nlohmann::json::array();
    for (const Task* t : registry.All())
      list.push_back({{"id", t->id}, {"category", t->category}, {"description", t->description},
                      {"signature", t->signature}, {"flops", t->flops}, {"bytes", t->bytes}, {"threads", t->threads}});
    std::cout << list.dump(2) << "\n";
  } else {
    for (const Task* t : registry.All()) std::cout << t->id << "  [" << t->category << "]  " << t->signature << "\n";
  }
  for (const std::string& e : registry.errors()) spdlog::warn("task not loaded: {}", e);
  return registry.errors().empty() ? 0 : 1;
}

int Eval(const TaskRegistry& registry, const std::string& task_id, const std::string& source_path,
         const std::string& backend_name, bool as_json, bool samples, double budget, bool no_timing) {
  const Task* task = registry.Find(task_id);
  if (!task) {
    spdlog::error("unknown task '{}' (see `kernelgym tasks`)", task_id);
    for (const std::string& e : registry.errors()) spdlog::warn("task not loaded: {}", e);
    return 2;
  }
  std::ifstream in(source_path, std::ios::binary);
  if (!in) {
    spdlog::error("cannot read source file '{}'", source_path);
    return 2;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  RegisterBuiltinBackends();
  BackendConfig config = DefaultBackendConfig();
  config.prestart_harness = false;  // one evaluation, then exit: a second harness would be wasted
  std::unique_ptr<Backend> backend = BackendRegistry::Global().Create(backend_name, config);
  if (!backend) {
    spdlog::error("unknown backend '{}'", backend_name);
    return 2;
  }
  EvalOptions options;
  options.timing.budget_seconds = budget;
  options.run_timing = !no_timing;
  const EvalResult result = backend->Evaluate(*task, ss.str(), options);
  if (as_json) std::cout << ResultToJson(result, samples).dump(2) << "\n";
  else std::cout << RenderResult(result, ss.str());
  return result.status == Status::kOk ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Results go to stdout (possibly as JSON); everything else, to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kernelgym"));
  spdlog::set_pattern("kernelgym: %^%l%$: %v");
  CLI::App app{"kernelgym: a reinforcement-learning environment for kernel optimization"};
  app.require_subcommand(1);
  std::string suites = DefaultSuitesRoot().string();
  app.add_option("--suites", suites, "folder holding <suite>/<task>/task.json");

  bool as_json = false;
  CLI::App* tasks = app.add_subcommand("tasks", "list the tasks");
  tasks->add_flag("--json", as_json, "print JSON");

  std::string task_id, source, backend = "cpu";
  bool samples = false, no_timing = false;
  double budget = 1.0;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a kernel source on a task");
  eval->add_option("--task", task_id, "task id, e.g. cpu/softmax_rows")->required();
  eval->add_option("--source", source, "the kernel's C++ source file")->required();
  eval->add_option("--backend", backend, "runner backend")->capture_default_str();
  eval->add_flag("--json", as_json, "print one JSON object");
  eval->add_flag("--samples", samples, "include raw timing samples in --json output");
  eval->add_option("--budget", budget, "timing budget in seconds")->capture_default_str()->check(CLI::Range(0.05, 600.0));
  eval->add_flag("--no-timing", no_timing, "stop after correctness");

  CLI11_PARSE(app, argc, argv);
  const TaskRegistry registry = TaskRegistry::LoadFrom(suites);
  if (tasks->parsed()) return ListTasks(registry, as_json);
  return Eval(registry, task_id, source, backend, as_json, samples, budget, no_timing);
}
