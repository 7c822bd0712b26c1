#include "datasets/trajectory/store_stats.h"

#include <cstdio>
#include <set>

#include "datasets/trajectory/record_access.h"
#include "datasets/trajectory/record_schema.h"

namespace kernelgym {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using record::Field;

std::string StringOr(const json& value, const std::string& fallback) {
  return value.is_string() ? value.get<std::string>() : fallback;
}

std::string Number(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", value);
  return buf;
}

}  // namespace

StoreStats ComputeStoreStats(TrajectoryReader& reader) {
  StoreStats stats;
  std::set<std::string> episodes;
  double reward_sum = 0;
  uint64_t rewards = 0;
  json record;
  while (reader.Next(record)) {
    ++stats.records;
    const std::string kind = StringOr(Field(record, record::kKind), "");
    if (kind == record::kKindReset) {
      ++stats.resets;
    } else if (kind == record::kKindTransition) {
      ++stats.transitions;
      const json& reward = Field(record, record::kReward);
      if (reward.is_number()) {
        reward_sum += reward.get<double>();
        ++rewards;
      }
    } else {
      ++stats.other_kinds;
    }
    const json& episode = Field(record, record::kEpisode);
    if (!episode.is_null()) episodes.insert(episode.dump());

    const json& observation = Field(record, record::kObservation);
    const std::string status = StringOr(Field(observation, record::obs::kStatus), "");
    ++stats.statuses[status];
    TaskFigures& task = stats.tasks[StringOr(Field(record, record::kTask), "")];
    ++task.records;
    const json& speedup = Field(observation, record::obs::kSpeedup);
    if (status == record::obs::kStatusOk && speedup.is_number()) {
      const double value = speedup.get<double>();
      if (!task.best_speedup || value > *task.best_speedup) task.best_speedup = value;
    }
  }
  stats.episodes = episodes.size();
  if (rewards > 0) stats.mean_reward = reward_sum / static_cast<double>(rewards);
  const ReaderStats& read = reader.stats();
  stats.segments = read.segments;
  stats.bytes = read.bytes;
  stats.torn = read.torn;
  stats.corrupt = read.corrupt;
  stats.unreadable = read.unreadable;
  stats.problems = read.problems;
  return stats;
}

ordered_json StoreStatsToJson(const StoreStats& s) {
  ordered_json statuses = ordered_json::object();
  for (const auto& [status, count] : s.statuses) statuses[status] = count;
  ordered_json tasks = ordered_json::object();
  for (const auto& [id, figures] : s.tasks) {
    tasks[id] = {{"records", figures.records},
                 {"best_speedup", figures.best_speedup ? ordered_json(*figures.best_speedup) : ordered_json()}};
  }
  ordered_json problems = ordered_json::array();
  for (const ReadProblem& p : s.problems) problems.push_back(p.Describe());
  return {{"records", s.records},
          {"resets", s.resets},
          {"transitions", s.transitions},
          {"other_kinds", s.other_kinds},
          {"episodes", s.episodes},
          {"tasks", s.tasks.size()},
          {"statuses", statuses},
          {"mean_reward", s.mean_reward ? ordered_json(*s.mean_reward) : ordered_json()},
          {"per_task", tasks},
          {"segments", s.segments},
          {"bytes", s.bytes},
          {"torn_lines", s.torn},
          {"corrupt_lines", s.corrupt},
          {"unreadable_segments", s.unreadable},
          {"problems", problems}};
}

std::string RenderStoreStats(const StoreStats& s) {
  std::string text;
  text += "records      " + std::to_string(s.records) + " (" + std::to_string(s.resets) + " resets, " +
          std::to_string(s.transitions) + " transitions";
  if (s.other_kinds > 0) text += ", " + std::to_string(s.other_kinds) + " of another kind";
  text += ")\n";
  text += "episodes     " + std::to_string(s.episodes) + "\n";
  text += "tasks        " + std::to_string(s.tasks.size()) + "\n";
  text += "mean reward  " + (s.mean_reward ? Number(*s.mean_reward) : std::string("-")) + "\n";
  text += "store        " + std::to_string(s.segments) + " segment(s), " + std::to_string(s.bytes) + " bytes, " +
          std::to_string(s.torn) + " torn line(s), " + std::to_string(s.corrupt) + " corrupt line(s)";
  if (s.unreadable > 0) text += ", " + std::to_string(s.unreadable) + " unreadable segment(s)";
  text += "\n";
  if (!s.statuses.empty()) {
    text += "statuses\n";
    for (const auto& [status, count] : s.statuses)
      text += "  " + (status.empty() ? std::string("(none)") : status) + "  " + std::to_string(count) + "\n";
  }
  if (!s.tasks.empty()) {
    text += "tasks (records, best speedup)\n";
    for (const auto& [id, figures] : s.tasks) {
      text += "  " + (id.empty() ? std::string("(none)") : id) + "  " + std::to_string(figures.records) + "  " +
              (figures.best_speedup ? Number(*figures.best_speedup) + "x" : std::string("-")) + "\n";
    }
  }
  for (const ReadProblem& p : s.problems) text += "problem: " + p.Describe() + "\n";
  return text;
}

}  // namespace kernelgym
