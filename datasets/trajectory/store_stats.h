// Figures about a trajectory store: what `kernelgym dataset stats` prints (docs/dataset.md).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "datasets/trajectory/reader.h"

namespace kernelgym {

struct TaskFigures {
  uint64_t records = 0;
  std::optional<double> best_speedup;  // the best observation.speedup among "ok" records
};

struct StoreStats {
  uint64_t records = 0;
  uint64_t resets = 0;
  uint64_t transitions = 0;
  uint64_t other_kinds = 0;                  // records whose kind is neither (a newer writer, or damage)
  uint64_t episodes = 0;                     // distinct episode ids
  std::map<std::string, uint64_t> statuses;  // observation.status over all records ("" = missing)
  std::optional<double> mean_reward;         // over transitions with a numeric reward
  std::map<std::string, TaskFigures> tasks;  // by task id
  // From the reader.
  uint64_t segments = 0;
  uint64_t bytes = 0;
  uint64_t torn = 0;
  uint64_t corrupt = 0;
  uint64_t unreadable = 0;
  std::vector<ReadProblem> problems;
};

// Reads the whole store.
StoreStats ComputeStoreStats(TrajectoryReader& reader);

nlohmann::ordered_json StoreStatsToJson(const StoreStats& stats);
std::string RenderStoreStats(const StoreStats& stats);

}  // namespace kernelgym
