// Encoding tasks, observations and knob settings as the learned models' inputs (FeatureLayout).
// Every input is finite and roughly in [-1, 1] or [0, 1]: log-scaled counts, one-hots, fractions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/learned/feature_layout.h"
#include "policies/learned/knob_space.h"
#include "policies/learned/model_api.h"

namespace kernelgym::learned {

// Observation features a policy does not read: they describe the episode's history or the
// machine's clock (steps and seconds left, the best so far, re-use, evaluation seconds), so a
// cached evaluation would replay them stale. The trainer's own episode features replace them.
bool IsHistoryFeature(const std::string& name);

// The layout of a new model: the server's observation features minus the history ones, and the
// categories, knob names and string values of the training tasks (sorted). With `knob_names`
// false the knob-name and value-token vocabularies stay empty (every name and string value reads
// the "other" slot): the model acts on what any template has, each value's position in its
// domain, domain size, default-ness and magnitude, so nothing it learns is tied to names that a
// held-out template does not share (`kernelgym train ... --no-knob-names`).
FeatureLayout BuildLayout(const std::vector<std::string>& server_feature_names,
                          const std::vector<protocol::TaskInfo>& tasks, bool knob_names = true);

// Every observation feature the layout reads must be one the server announces; otherwise an
// error naming the first missing one (the server's feature layout changed since the model was
// trained).
bool CheckServerFeatures(const FeatureLayout& layout, const std::vector<std::string>& server_feature_names,
                         std::string& error);

// Observation features by name (a measurement keeps them so, see measurements.h).
using NamedFeatures = std::map<std::string, double>;
NamedFeatures NameFeatures(const std::vector<std::string>& names, const std::vector<double>& values);

struct EpisodeProgress {
  int step = 0;              // steps taken so far
  int max_steps = 1;         // the episode's length
  double log_gain_best = 0;  // log(best speedup so far / the starter's)
  double log_gain_last = 0;  // log(last speedup / the starter's); 0 when the last step failed
};

std::vector<float> TaskFeatures(const FeatureLayout& layout, const protocol::TaskInfo& task, const KnobSpace& space);
// Row for knob k set to value v, with `current` the setting in effect (is_current flag).
std::vector<float> ChoiceFeatures(const FeatureLayout& layout, const KnobSpace& space, std::size_t k, std::size_t v,
                                  const Setting& current);

// A missing observation feature reads 0 (CheckServerFeatures is the place that refuses a layout).
PolicyState EncodeState(const FeatureLayout& layout, const std::vector<float>& task_features,
                        const NamedFeatures& observation, const EpisodeProgress& progress, const KnobSpace& space,
                        const Setting& current);
CostInput EncodeSetting(const FeatureLayout& layout, const std::vector<float>& task_features, const KnobSpace& space,
                        const Setting& setting);

}  // namespace kernelgym::learned
