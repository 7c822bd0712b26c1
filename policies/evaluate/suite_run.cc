#include "policies/evaluate/suite_run.h"

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

Progress::Progress(std::ostream& out, bool terminal, int total, std::string label)
    : out_(out), terminal_(terminal), total_(total), label_(std::move(label)) {}

void Progress::Step(const std::string& item, const std::string& result) {
  ++done_;
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? kWidth * done_ / total_ : kWidth;
  std::string bar(static_cast<std::size_t>(kWidth + 2), '.');
  bar.front() = '[';
  bar.back() = ']';
  std::fill_n(bar.begin() + 1, filled, '#');
  std::ostringstream line;
  line << label_ << " " << bar << " " << done_ << "/" << total_ << " " << item << ": " << result;
  if (terminal_) out_ << "\r\033[K" << line.str() << std::flush;
  else out_ << line.str() << "\n" << std::flush;
}

void Progress::Done() {
  if (terminal_) out_ << "\n" << std::flush;
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
  for (const nlohmann::json& t : env.ListTasks(options.suite)) {
    const nlohmann::json backends = t.value("backends", nlohmann::json::array());
    const std::string id = t.value("id", "");
    const bool chosen = options.tasks.empty() ||
                        std::find(options.tasks.begin(), options.tasks.end(), id) != options.tasks.end();
    if (chosen && std::find(backends.begin(), backends.end(), options.backend) != backends.end()) tasks.push_back(id);
  }
  std::optional<Progress> progress;
  if (progress_out)
    progress.emplace(*progress_out, terminal, static_cast<int>(tasks.size()) * options.episodes, report.policy);
  for (const std::string& task : tasks)
    for (int e = 0; e < options.episodes; ++e) {
      EpisodeContext context;
      context.task = env.GetTask(task);
      context.backend = options.backend;
      context.seed = options.seed + static_cast<uint64_t>(e);
      context.record = options.record;
      context.budget = options.budget;
      context.assistant = options.assistant;
      context.model = options.model;
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
