// The held-out evaluation: on tasks a policy was not trained on, the speedup its first setting
// reaches and the best of its first k settings, against the template's defaults and uniformly
// random settings. Every setting is measured through the Evaluator, so the policies are compared
// on the same measurements of the same settings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/learned/episodes.h"

namespace kernelgym::learned {

struct HeldoutOptions {
  int steps = 4;      // k
  int seeds = 8;      // episodes of each stochastic chooser (random, sampled policy) per task
  uint64_t seed = 1;
};

// Speedups are against the task's reference; 0 when no setting was correct.
struct HeldoutRow {
  std::string task;
  double starter = 0, best_known = 0;  // best known: the fastest setting the store holds for the task
  double defaults = 0;
  double random_first = 0, random_best = 0;    // geometric means over the seeds
  double greedy_first = 0, greedy_best = 0;    // the policy's most likely values (deterministic)
  double sampled_first = 0, sampled_best = 0;  // geometric means over the seeds
};

std::vector<HeldoutRow> EvaluateHeldout(PolicyModel& policy, Evaluator& evaluator, MeasurementStore& store,
                                        const std::vector<const TaskInfo*>& tasks, const HeldoutOptions& options);

// JSON (rows + geometric-mean summary of each column over the starter) and Markdown.
nlohmann::json HeldoutToJson(const std::vector<HeldoutRow>& rows, const HeldoutOptions& options);
std::string HeldoutToMarkdown(const std::vector<HeldoutRow>& rows, const HeldoutOptions& options);

}  // namespace kernelgym::learned
