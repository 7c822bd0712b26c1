#include "policies/learned/heldout.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "policies/learned/ppo.h"

namespace kernelgym::learned {
namespace {

// Geometric mean of speedups with a failure (0) counted as kFailedRatio of the starter.
double GeoMean(const std::vector<double>& speedups, double starter) {
  if (speedups.empty()) return 0;
  double sum = 0;
  for (double s : speedups) sum += std::log(s > 0 ? s : kFailedRatio * starter);
  return std::exp(sum / static_cast<double>(speedups.size()));
}

struct Column {
  const char* name;
  double HeldoutRow::*field;
};
const std::vector<Column>& Columns() {
  static const std::vector<Column> columns = {
      {"defaults", &HeldoutRow::defaults},           {"random_first", &HeldoutRow::random_first},
      {"random_best", &HeldoutRow::random_best},     {"greedy_first", &HeldoutRow::greedy_first},
      {"greedy_best", &HeldoutRow::greedy_best},     {"sampled_first", &HeldoutRow::sampled_first},
      {"sampled_best", &HeldoutRow::sampled_best},   {"best_known", &HeldoutRow::best_known}};
  return columns;
}

std::string Fixed(double x, const char* format = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

}  // namespace

std::vector<HeldoutRow> EvaluateHeldout(PolicyModel& policy, Evaluator& evaluator, MeasurementStore& store,
                                        const std::vector<const TaskInfo*>& tasks, const HeldoutOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<const TaskInfo*> repeated;
  for (const TaskInfo* t : tasks)
    for (int s = 0; s < options.seeds; ++s) repeated.push_back(t);
  const auto defaults = RunEpisodes(nullptr, evaluator, tasks, 1, Chooser::kDefault, rng);
  const auto greedy = RunEpisodes(&policy, evaluator, tasks, options.steps, Chooser::kGreedy, rng);
  const auto random = RunEpisodes(nullptr, evaluator, repeated, options.steps, Chooser::kRandom, rng);
  const auto sampled = RunEpisodes(&policy, evaluator, repeated, options.steps, Chooser::kSample, rng);

  std::vector<HeldoutRow> rows;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const TaskInfo& task = *tasks[i];
    HeldoutRow row;
    row.task = task.id;
    row.starter = task.starter.speedup;
    row.defaults = defaults[i].first_speedup;
    row.greedy_first = greedy[i].first_speedup;
    row.greedy_best = greedy[i].best_speedup;
    std::vector<double> rf, rb, sf, sb;
    for (std::size_t e = 0; e < repeated.size(); ++e) {
      if (repeated[e] != tasks[i]) continue;
      rf.push_back(random[e].first_speedup);
      rb.push_back(random[e].best_speedup);
      sf.push_back(sampled[e].first_speedup);
      sb.push_back(sampled[e].best_speedup);
    }
    row.random_first = GeoMean(rf, row.starter);
    row.random_best = GeoMean(rb, row.starter);
    row.sampled_first = GeoMean(sf, row.starter);
    row.sampled_best = GeoMean(sb, row.starter);
    for (const Measurement* m : store.ForTask(task.id))
      if (m->ok()) row.best_known = std::max(row.best_known, m->speedup);
    rows.push_back(row);
  }
  return rows;
}

nlohmann::json HeldoutToJson(const std::vector<HeldoutRow>& rows, const HeldoutOptions& options) {
  nlohmann::json out = {{"steps", options.steps}, {"seeds", options.seeds}, {"seed", options.seed},
                        {"tasks", nlohmann::json::array()}};
  std::map<std::string, double> log_sum;
  for (const HeldoutRow& r : rows) {
    nlohmann::json row = {{"task", r.task}, {"starter", r.starter}};
    for (const Column& c : Columns()) {
      row[c.name] = r.*c.field;
      const double value = r.*c.field > 0 ? r.*c.field : kFailedRatio * r.starter;
      log_sum[c.name] += r.starter > 0 ? std::log(value / r.starter) : 0;
    }
    out["tasks"].push_back(row);
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const Column& c : Columns())
    summary[std::string(c.name) + "_over_starter"] = rows.empty() ? 0 : std::exp(log_sum[c.name] / static_cast<double>(rows.size()));
  out["geomean"] = summary;
  return out;
}

std::string HeldoutToMarkdown(const std::vector<HeldoutRow>& rows, const HeldoutOptions& options) {
  std::ostringstream md;
  md << "Speedup against each task's reference; k = " << options.steps << "; random and sampled are geometric means over "
     << options.seeds << " episodes; a failed setting counts as " << kFailedRatio << "x the starter.\n\n";
  md << "| task | starter | defaults | random 1 | random best-of-k | policy 1 | policy best-of-k | sampled 1 | "
        "sampled best-of-k | best known |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const HeldoutRow& r : rows) {
    md << "| " << r.task << " | " << Fixed(r.starter, "%.3f");
    for (const Column& c : Columns()) md << " | " << Fixed(r.*c.field, "%.3f");
    md << " |\n";
  }
  const nlohmann::json summary = HeldoutToJson(rows, options)["geomean"];
  md << "| **geomean / starter** | 1.00";
  for (const Column& c : Columns()) md << " | " << Fixed(summary[std::string(c.name) + "_over_starter"].get<double>());
  md << " |\n";
  return md.str();
}

}  // namespace kernelgym::learned
