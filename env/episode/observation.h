// Builds what a policy sees from one evaluation: the structured map, a compact deterministic
// Markdown rendering for language models, and a fixed-length feature vector for learned policies
// (its layout, FeatureNames(), is announced by `hello`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "datasets/task.h"
#include "env/protocol/results.h"

namespace kernelgym {

struct ObservationContext {
  const Task& task;
  const std::string& source;   // the current source (after the action)
  int64_t step = 0;            // 0 after reset
  double best_speedup = 0;     // best correct measured speedup so far, this evaluation included
  double best_estimated_speedup = 0;  // the same for trusted TPU estimates (pallas off a TPU)
  int64_t steps_left = 0;
  int64_t max_steps = 0;
  double seconds_left = 0;
  double time_budget_s = 0;
  bool reused = false;         // unchanged source: `result` is the earlier evaluation
  std::string action_error;    // non-empty: the action could not be applied; `result` is the
                               // evaluation of the source that is still current
  const nlohmann::json* report = nullptr;  // ResultToJson(result, false) when the caller has it
                                           // already (a re-used evaluation); else computed here
};

protocol::Observation BuildObservation(const EvalResult& result, const ObservationContext& context);

// Names of the feature vector's entries, in order. Stable within a protocol version.
const std::vector<std::string>& FeatureNames();

}  // namespace kernelgym
