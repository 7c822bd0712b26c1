// kernelgym: the command line.
//   kernelgym eval --task cpu/softmax_rows --source my_kernel.cpp [--json]
//   kernelgym eval --task cpu/softmax_rows --knobs SIMD=1,EXP=exp_poly
//   kernelgym tasks [--suite S] [--json] [--measure]
//   kernelgym runner --connect tcp://HOST:PORT [--backend cpu]... [--id ID] [--heartbeat-s 0.5] [--health-file F]
//   kernelgym keys generate --out keys/server        (CURVE key pairs, docs/security.md)
//   kernelgym health --connect tcp://HOST:PORT [--require-backend cpu] | --file F --max-age-s S   (probes)
//   kernelgym agent --task cpu/softmax_rows --endpoint http://127.0.0.1:8000/v1 --model M
//   kernelgym hitl --task cpu/softmax_rows [--endpoint URL --model M]
//   kernelgym search --task cpu/softmax_rows --proposer knobs|mutate|llm [--algorithm beam|parallel|ucb]
//   kernelgym evaluate --policy knob-search --policy random-knobs --suite cpu [--out DIR]
//   kernelgym collect --policy knob-search --suite cpu --out DIR
//   kernelgym train ppo|bc|cost-model|sweep|eval ... (learned knob policies and cost models)
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/health_command.h"
#include "cli/keys_command.h"
#include "cli/serve_command.h"
#include "cli/tasks_command.h"
#include "core/result_json.h"
#include "datasets/suite.h"
#include "datasets/trajectory/dataset_command.h"
#include "env/episode/knobs.h"
#include "policies/agent/agent_command.h"
#include "policies/evaluate/evaluate_command.h"
#include "policies/hitl/hitl_command.h"
#include "policies/learned/train_command.h"
#include "policies/search/search_command.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/host/runner_host.h"
#include "tpu_runner/runner_config.h"

namespace {

using namespace kernelgym;

int Eval(const TaskRegistry& registry, const std::string& task_id, const std::string& source_path,
         const std::optional<std::string>& knobs, const std::string& backend_name, bool as_json, bool samples, double budget,
         double target_ci, bool no_timing) {
  const Task* task = registry.Find(task_id);
  if (!task) {
    spdlog::error("unknown task '{}' (see `kernelgym tasks`)", task_id);
    for (const std::string& e : registry.errors()) spdlog::warn("task not loaded: {}", e);
    return 2;
  }
  if (!task->Supports(backend_name)) {
    spdlog::error("task '{}' has no version for backend '{}'", task_id, backend_name);
    return 2;
  }
  std::ostringstream ss;
  if (source_path.empty() && !knobs) {
    ss << task->StarterFor(backend_name);
  } else if (knobs) {
    const auto values = knobs->empty() ? std::optional(std::map<std::string, protocol::KnobValue>{})
                                       : protocol::ParseKnobList(*knobs);
    if (!values) {
      spdlog::error("--knobs takes NAME=value[,NAME=value...], got '{}'", *knobs);
      return 2;
    }
    const EditOutcome applied = ApplyKnobs(*task, backend_name, *values);  // says when it has no template
    if (!applied.source) {
      spdlog::error("--knobs: {}", applied.error);
      return 2;
    }
    ss << *applied.source;
  } else {
    std::ifstream in(source_path, std::ios::binary);
    if (!in) {
      spdlog::error("cannot read source file '{}'", source_path);
      return 2;
    }
    ss << in.rdbuf();
  }
  RegisterBuiltinBackends();
  BackendConfig config = DefaultBackendConfig();
  config.prestart_harness = false;  // one evaluation, then exit: a second harness would be wasted
  config.reference_zygote = false;  // and a zygote would load libtorch for one fork
  config.start_harness_before_compile = true;  // its libtorch load beside the compile, not after it
  std::unique_ptr<Backend> backend = BackendRegistry::Global().Create(backend_name, config);
  if (!backend) {
    spdlog::error("unknown backend '{}'", backend_name);
    return 2;
  }
  EvalOptions options;
  options.timing.budget_seconds = budget;
  options.timing.target_relative_ci = target_ci;
  options.run_timing = !no_timing;
  const EvalResult result = backend->Evaluate(*task, ss.str(), options);
  // The result's text is valid UTF-8 (the registry's backends and ResultToJson see to it); the
  // replace handler is the last guard: a result must never abort the CLI.
  if (as_json)
    std::cout << ResultToJson(result, samples).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else std::cout << RenderResult(result, ss.str());
  return result.status == Status::kOk ? 0 : 1;
}

// A subcommand whose options live in a struct of its own (`Command`, with its CLI::App* `app`):
// `add` puts it on the command line, `run` runs it once it was the one parsed.
struct Subcommand {
  std::function<void(CLI::App&)> add;
  std::function<bool()> parsed;
  std::function<int()> run;
};

template <typename Command>
Subcommand Listed(void (*add)(CLI::App&, Command&), int (*run)(Command&)) {
  auto command = std::make_shared<Command>();
  return {[command, add](CLI::App& app) { add(app, *command); },
          [command] { return command->app && command->app->parsed(); }, [command, run] { return run(*command); }};
}

// Set by SIGTERM/SIGINT: the runner finishes its current job, sends the result and exits 0.
std::atomic<bool> g_stop_runner{false};
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler may only touch a lock-free atomic");
extern "C" void StopRunner(int) { g_stop_runner.store(true); }

int Runner(RunnerHostOptions options) {
  struct sigaction action {};
  action.sa_handler = StopRunner;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // evaluations in progress keep their system calls
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  RegisterBuiltinBackends();
  options.backend_config = DefaultBackendConfig();
  return RunRunnerHost(options, g_stop_runner);
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
  // A runner logs each job at debug: at thousands of jobs a second, two lines per job at info
  // were a large share of its CPU (docs/benchmarks.md, "Runner pool").
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (local runners inherit it)")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  std::string jaxbench_dir;
  app.add_option("--jaxbench-dir", jaxbench_dir,
                 "also load this folder of JAXBench cases (<id>/baseline.py) as suite jaxbench-ext, pallas only "
                 "(sets KERNELGYM_JAXBENCH_DIR, so local runners see it too)");

  bool as_json = false;
  TasksCommandOptions tasks_options;
  CLI::App* tasks = app.add_subcommand("tasks", "list the tasks, their sizes, reference times and headroom");
  tasks->add_flag("--json", tasks_options.as_json, "print JSON");
  tasks->add_option("--suite", tasks_options.suite, "a suite: cpu, jaxbench-p, jaxbench-k, jaxbench, models, all")
      ->capture_default_str();
  tasks->add_option("--backend", tasks_options.backend, "list the tasks this backend has a version of (cpu, pallas)")
      ->capture_default_str();
  tasks->add_flag("--measure", tasks_options.measure,
                  "evaluate every starter here now instead of showing the recorded figures (measured.json)");
  tasks->add_option("--timing-budget-s", tasks_options.budget_seconds, "timing budget per starter with --measure, seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));

  std::string task_id, source, backend = "cpu";
  bool samples = false, no_timing = false;
  double budget = 1.0, target_ci = EvalOptions{}.timing.target_relative_ci;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a kernel source on a task");
  eval->footer("Exit status: 0 when the kernel passed (status ok), 1 when it did not (the verdict says why), "
               "2 for bad arguments (an unknown task, an unreadable file).");
  eval->add_option("--task", task_id, "task id, e.g. cpu/softmax_rows")->required();
  std::string knobs;
  auto* source_option = eval->add_option("--source", source, "the kernel's source file (default: the task's starter "
                                         "for the backend)");
  auto* knobs_option = eval->add_option("--knobs", knobs, "the task's knob template with these values instead of "
                                        "a source: NAME=value[,NAME=value...] (\"\" for the defaults)");
  source_option->excludes(knobs_option);
  eval->add_option("--backend", backend, "runner backend")->capture_default_str();
  eval->add_flag("--json", as_json, "print one JSON object");
  eval->add_flag("--samples", samples, "include raw timing samples in --json output");
  eval->add_option("--timing-budget-s", budget, "timing budget in seconds")->capture_default_str()->check(CLI::Range(0.05, 600.0));
  eval->add_option("--timing-target-ci", target_ci,
                   "stop timing once the speedup's 95% interval is within this fraction of it (0: run the whole budget)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  eval->add_flag("--no-timing", no_timing, "stop after correctness");

  RunnerHostOptions runner_options;
  CLI::App* runner = app.add_subcommand("runner", "evaluate jobs for a kernelgym server (until SIGTERM)");
  runner->add_option("--connect", runner_options.endpoint, "the server's runner endpoint, e.g. tcp://10.0.0.2:5556")
      ->required();
  runner->add_option("--backend", runner_options.backends, "a backend to serve (repeatable)")->capture_default_str();
  runner->add_option("--id", runner_options.runner_id, "runner id (default host:pid:random)");
  runner->add_option("--heartbeat-s", runner_options.heartbeat_interval_s,
                     "heartbeat interval until the server's welcome sets one")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 60.0));
  runner->add_option("--server-silence-s", runner_options.server_silence_s,
                     "reconnect and say hello again after hearing nothing from the server this long")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  runner->add_option("--slots", runner_options.slots, "jobs evaluated at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  runner->add_option("--health-file", runner_options.health_file,
                     "rewrite this file whenever the server is heard from (for `kernelgym health --file`)");
  std::string runner_server_key, runner_key;
  runner->add_option("--server-key", runner_server_key, "CURVE: the server's public key file (default $KERNELGYM_SERVER_KEY)");
  runner->add_option("--runner-key", runner_key, "CURVE: this runner's key pair file (default $KERNELGYM_RUNNER_KEY)");

  ServeCommand serve;
  AddServeCommand(app, serve);
  KeysCommand keys;
  AddKeysCommand(app, keys);
  HealthCommand health;
  AddHealthCommand(app, health);

  std::string store, format = "transitions", out = "-";
  CLI::App* dataset = app.add_subcommand("dataset", "read a trajectory store (docs/dataset.md)");
  dataset->require_subcommand(1);
  CLI::App* dataset_export = dataset->add_subcommand("export", "write the store's records in a standard format");
  dataset_export->add_option("--store", store, "the trajectory store folder")->required();
  dataset_export->add_option("--format", format, "transitions | sft | chat (the LLM policies' exchanges)")->capture_default_str();
  dataset_export->add_option("--out", out, "output file (JSON lines); - for stdout")->capture_default_str();
  ExportOptions export_options;
  dataset_export->add_flag("--dedup", export_options.dedup,
                           "leave out transitions whose kernel (task, backend, source) was already exported");
  CLI::App* dataset_stats = dataset->add_subcommand("stats", "summarize a store");
  dataset_stats->add_option("--store", store, "the trajectory store folder")->required();
  dataset_stats->add_flag("--json", as_json, "print JSON");

  // The policy commands are clients of a server (their own local one unless --connect is given);
  // each is an Add/Run pair over its own options, listed here once.
  std::vector<Subcommand> policy_commands = {
      Listed<agent::AgentCommand>(agent::AddAgentCommand, agent::RunAgentCommand),
      Listed<hitl::HitlCommand>(hitl::AddHitlCommand, hitl::RunHitlCommand),
      Listed<search::SearchCommand>(search::AddSearchCommand, search::RunSearchCommand),
      Listed<evaluate::EvaluateCommand>(evaluate::AddEvaluateCommand, evaluate::RunEvaluateCommand),
      Listed<evaluate::CollectCommand>(evaluate::AddCollectCommand, evaluate::RunCollectCommand),
      Listed<learned::TrainCommand>(learned::AddTrainCommand, learned::RunTrainCommand),
  };
  for (Subcommand& command : policy_commands) command.add(app);

  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (!jaxbench_dir.empty()) setenv("KERNELGYM_JAXBENCH_DIR", jaxbench_dir.c_str(), 1);
  if (serve.app->parsed()) return RunServeCommand(serve, suites);
  if (keys.app->parsed()) return RunKeysCommand(keys);
  if (health.app->parsed()) return RunHealthCommand(health, std::cout);
  for (Subcommand& command : policy_commands)
    if (command.parsed()) return command.run();
  if (dataset_export->parsed()) return RunDatasetExport(store, format, out, std::cerr, export_options);
  if (dataset_stats->parsed()) return RunDatasetStats(store, as_json, std::cout);
  if (runner->parsed()) {
    runner_options.suites_root = suites;
    std::string key_error;
    if (!runner_server_key.empty() || !runner_key.empty()) {
      if (runner_server_key.empty() || runner_key.empty()) key_error = "--server-key and --runner-key go together";
      else runner_options.curve = security::LoadClientKeys(runner_server_key, runner_key, key_error);
    } else {
      runner_options.curve = security::ClientKeysFromEnvironment("KERNELGYM_SERVER_KEY", "KERNELGYM_RUNNER_KEY", key_error);
    }
    if (!key_error.empty()) {
      spdlog::error("runner: {}", key_error);
      return 2;
    }
    return Runner(runner_options);
  }
  const TaskRegistry registry = TaskRegistry::LoadFrom(suites);
  if (tasks->parsed()) return RunTasksCommand(registry, suites, tasks_options, std::cout);
  return Eval(registry, task_id, source, knobs_option->count() ? std::optional(knobs) : std::nullopt, backend,
              as_json, samples, budget, target_ci, no_timing);
}
