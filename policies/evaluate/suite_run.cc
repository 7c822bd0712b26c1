#include "policies/evaluate/suite_run.h"

#include "policies/search/proposer.h"

#include <chrono>
#include <ctime>
#include <algorithm>
#include <iomanip>
#include <optional>
#include <sstream>

namespace kernelgym::evaluate {
namespace {

std::string NowIso() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::ostringstream s;
  s << std::put_time(&utc, "%Y-%m-%dT%H:%M:%SZ");
  return s.str();
}

}  // namespace

void AddSuiteRunFlags(CLI::App& a, SuiteRunOptions& run) {
  a.add_option("--suite", run.suite, "the suite: cpu, jaxbench-p, jaxbench-k, jaxbench, models, all")->capture_default_str();
  a.add_option("--backend", run.backend, "runner backend")->capture_default_str();
  a.add_option("--task", run.tasks, "only this task of the suite (repeatable)");
  a.add_option("--episodes", run.episodes, "episodes per task")->capture_default_str()->check(CLI::Range(1, 1000));
  a.add_option("--max-evaluations", run.budget, "evaluations per episode (steps for the agent and learned-knobs), as search's --max-evaluations")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  a.add_option("--seed", run.seed, "episode e of every task uses seed + e")->capture_default_str();
  a.add_option("--policy-model", run.policy_model, "learned-knobs: the trained knob policy (kernelgym train ppo|bc)");
}

bool PoliciesReady(const std::vector<std::string>& names, const SuiteRunOptions& run, std::string& error) {
  EpisodeContext given;  // what the command line gives the policies
  given.assistant = run.assistant;
  given.policy_model = run.policy_model;
  for (const std::string& name : names)
    if (!PolicyRegistry::Global().Ready(name, given, error)) return false;
  return true;
}

Report RunSuite(client::Client& env, EpisodePolicy& policy, const SuiteRunOptions& options, std::ostream* progress_out,
                bool terminal, std::ostream& log) {
  Report report;
  report.policy = std::string(policy.name());
  report.suite = options.suite;
  report.backend = options.backend;
  report.created = NowIso();
  const protocol::HelloResult hello = env.Hello();
  report.provenance = {{"server", hello.server},     {"protocol", hello.protocol}, {"budget", options.budget},
                       {"episodes", options.episodes}, {"seed", options.seed},       {"model", options.model}};
  std::vector<std::string> tasks;
  for (const protocol::TaskSummary& t : env.ListTasks(options.suite)) {
    const bool chosen = options.tasks.empty() ||
                        std::find(options.tasks.begin(), options.tasks.end(), t.id) != options.tasks.end();
    if (chosen && std::find(t.backends.begin(), t.backends.end(), options.backend) != t.backends.end())
      tasks.push_back(t.id);
  }
  std::optional<Progress> progress;
  if (progress_out)
    progress.emplace(*progress_out, terminal, static_cast<int>(tasks.size()) * options.episodes, report.policy);
  for (const std::string& task : tasks)
    for (int e = 0; e < options.episodes; ++e) {
      EpisodeContext context;
      // The knob policies read the top-level knobs: this backend's template (pallas.json's on pallas).
      context.task = search::TaskForBackend(env.GetTask(task), options.backend);
      context.backend = options.backend;
      context.seed = options.seed + static_cast<uint64_t>(e);
      context.record = options.record;
      context.budget = options.budget;
      context.assistant = options.assistant;
      context.model = options.model;
      context.policy_model = options.policy_model;
      TaskOutcome outcome;
      try {
        outcome = policy.Run(env, context, log);
      } catch (const client::ServerError& error) {
        outcome.task = task;
        outcome.status = std::string("error: ") + error.what();
      }
      outcome.episode = e;
      report.outcomes.push_back(outcome);
      if (progress) {
        std::ostringstream result;
        result << (outcome.correct ? std::string("ok") : outcome.status) << " " << std::fixed << std::setprecision(2)
               << outcome.speedup << "x";
        std::string item = task;
        if (options.episodes > 1) item.append(" #").append(std::to_string(e));
        progress->Step(item, result.str());
      }
    }
  if (progress) progress->Done();
  report.metrics = ComputeMetrics(report.outcomes);
  return report;
}

}  // namespace kernelgym::evaluate
