#include "policies/learned/features.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kernelgym::learned {
namespace {

// One-hot over `vocabulary` plus a last slot for anything else.
void OneHot(std::vector<float>& out, const std::vector<std::string>& vocabulary, const std::string& token) {
  const auto it = std::find(vocabulary.begin(), vocabulary.end(), token);
  const std::size_t start = out.size();
  out.resize(start + vocabulary.size() + 1, 0.0f);
  out[start + static_cast<std::size_t>(it - vocabulary.begin())] = 1.0f;
}

float Clamp(double x, double lo, double hi) { return static_cast<float>(std::isfinite(x) ? std::clamp(x, lo, hi) : 0.0); }

double Log10AtLeast1(double x) { return std::log10(std::max(x, 1.0)); }

}  // namespace

bool IsHistoryFeature(const std::string& name) {
  static const std::set<std::string> history = {"steps_left_fraction", "seconds_left_fraction", "log_best_speedup",
                                                "reused", "log1p_eval_seconds"};
  return history.count(name) > 0;
}

FeatureLayout BuildLayout(const std::vector<std::string>& server_feature_names,
                          const std::vector<protocol::TaskInfo>& tasks, bool knob_names) {
  FeatureLayout layout;
  for (const std::string& name : server_feature_names)
    if (!IsHistoryFeature(name)) layout.observation.push_back(name);
  std::set<std::string> categories, knobs, tokens;
  for (const protocol::TaskInfo& task : tasks) {
    categories.insert(task.summary.category);
    const KnobSpace space = KnobSpace::FromTask(task);
    for (std::size_t k = 0; k < space.knobs(); ++k) {
      knobs.insert(space.name(k));
      for (const protocol::KnobValue& v : space.values(k))
        if (std::holds_alternative<std::string>(v)) tokens.insert(std::get<std::string>(v));
    }
  }
  layout.categories.assign(categories.begin(), categories.end());
  if (knob_names) {
    layout.knob_names.assign(knobs.begin(), knobs.end());
    layout.value_tokens.assign(tokens.begin(), tokens.end());
  }
  return layout;
}

bool CheckServerFeatures(const FeatureLayout& layout, const std::vector<std::string>& server_feature_names,
                         std::string& error) {
  for (const std::string& name : layout.observation)
    if (std::find(server_feature_names.begin(), server_feature_names.end(), name) == server_feature_names.end()) {
      error = "the model reads the observation feature '" + name +
              "', which this server does not provide (its hello lists " + std::to_string(server_feature_names.size()) +
              " features): the server's feature layout changed since the model was trained; retrain it against this "
              "server";
      return false;
    }
  return true;
}

NamedFeatures NameFeatures(const std::vector<std::string>& names, const std::vector<double>& values) {
  NamedFeatures out;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) out[names[i]] = values[i];
  return out;
}

std::vector<float> TaskFeatures(const FeatureLayout& layout, const protocol::TaskInfo& task, const KnobSpace& space) {
  std::vector<float> out;
  out.reserve(layout.task_size());
  OneHot(out, layout.categories, task.summary.category);
  const double flops = task.summary.flops, bytes = task.summary.bytes;
  out.push_back(Clamp(Log10AtLeast1(flops) / 12, 0, 2));
  out.push_back(Clamp(Log10AtLeast1(bytes) / 12, 0, 2));
  out.push_back(Clamp(bytes > 0 ? std::log10(std::max(flops / bytes, 1e-3)) / 3 : 0, -1, 1));
  out.push_back(Clamp(static_cast<double>(space.knobs()) / 8, 0, 2));
  out.push_back(Clamp(space.empty() ? 0 : std::log2(static_cast<double>(space.size())) / 8, 0, 2));
  return out;
}

std::vector<float> ChoiceFeatures(const FeatureLayout& layout, const KnobSpace& space, std::size_t k, std::size_t v,
                                  const Setting& current) {
  std::vector<float> out;
  out.reserve(layout.choice_size());
  OneHot(out, layout.knob_names, space.name(k));
  const auto& values = space.values(k);
  const protocol::KnobValue& value = values[v];
  const double n = static_cast<double>(values.size());
  out.push_back(n > 1 ? static_cast<float>(static_cast<double>(v) / (n - 1)) : 0.0f);  // position in the domain
  out.push_back(Clamp(n / 8, 0, 2));
  out.push_back(static_cast<int>(v) == space.defaults()[k] ? 1.0f : 0.0f);
  out.push_back(k < current.size() && current[k] == static_cast<int>(v) ? 1.0f : 0.0f);
  const bool numeric = !std::holds_alternative<std::string>(value);
  out.push_back(numeric ? 1.0f : 0.0f);
  double magnitude = 0;
  if (std::holds_alternative<int64_t>(value)) magnitude = static_cast<double>(std::get<int64_t>(value));
  if (std::holds_alternative<double>(value)) magnitude = std::get<double>(value);
  out.push_back(numeric ? Clamp(std::log2(1 + std::fabs(magnitude)) / 8, 0, 2) : 0.0f);
  if (numeric) out.resize(out.size() + layout.value_tokens.size() + 1, 0.0f);
  else OneHot(out, layout.value_tokens, std::get<std::string>(value));
  return out;
}

PolicyState EncodeState(const FeatureLayout& layout, const std::vector<float>& task_features,
                        const NamedFeatures& observation, const EpisodeProgress& progress, const KnobSpace& space,
                        const Setting& current) {
  PolicyState state;
  state.context.reserve(layout.context_size());
  for (const std::string& name : layout.observation) {
    const auto it = observation.find(name);
    state.context.push_back(it == observation.end() ? 0.0f : Clamp(it->second, -20, 20));
  }
  state.context.insert(state.context.end(), task_features.begin(), task_features.end());
  state.context.push_back(Clamp(static_cast<double>(progress.step) / std::max(progress.max_steps, 1), 0, 1));
  state.context.push_back(Clamp(progress.log_gain_best, -5, 5));
  state.context.push_back(Clamp(progress.log_gain_last, -5, 5));
  state.choices.resize(space.knobs());
  for (std::size_t k = 0; k < space.knobs(); ++k)
    for (std::size_t v = 0; v < space.values(k).size(); ++v)
      state.choices[k].push_back(ChoiceFeatures(layout, space, k, v, current));
  return state;
}

CostInput EncodeSetting(const FeatureLayout& layout, const std::vector<float>& task_features, const KnobSpace& space,
                        const Setting& setting) {
  CostInput input;
  input.task = task_features;
  for (std::size_t k = 0; k < space.knobs(); ++k)
    input.knob_rows.push_back(ChoiceFeatures(layout, space, k, static_cast<std::size_t>(setting[k]), setting));
  return input;
}

}  // namespace kernelgym::learned
