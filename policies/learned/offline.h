// Training from recorded data rather than from the environment: behavior cloning of the best
// knob settings a search found, and fitting the cost model to measured settings. Both read a
// KnobDataset (measurement files or `kernelgym collect` exports).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "policies/learned/episodes.h"
#include "policies/learned/measurements.h"
#include "policies/learned/model_api.h"

namespace kernelgym::learned {

struct FitOptions {
  int epochs = 300;
  int minibatch = 32;
  uint64_t seed = 1;
};

// Behavior cloning: for each task with a correct setting in `data`, the policy's first-step state
// (the starter's observation, the defaults in effect) labelled with the fastest setting measured.
// Returns the mean loss of each epoch.
std::vector<double> CloneBestSettings(PolicyModel& policy, const std::vector<const TaskInfo*>& tasks,
                                      const KnobDataset& data, const FitOptions& options);

// The cost model's target for a measured setting: its log-speedup against the reference. Failed
// settings are left out of the regression (their speedup is undefined); ranking puts them last
// only through what the model learned from the correct ones.
std::vector<double> FitCostModel(CostModel& model, const std::vector<const TaskInfo*>& tasks, const KnobDataset& data,
                                 const FitOptions& options, std::size_t& samples);

// How well a cost model orders one task's measured settings.
struct RankQuality {
  std::size_t samples = 0;
  double spearman = 0;        // rank correlation of predicted and measured log-speedup (correct settings)
  double top1_fraction = 0;   // speedup of the model's top setting / the best measured (failed top: 0)
};
RankQuality MeasureRanking(CostModel& model, const TaskInfo& task, const std::vector<Measurement>& measured);

}  // namespace kernelgym::learned
