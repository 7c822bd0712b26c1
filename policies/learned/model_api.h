// The learned models as the torch-free side sees them. The networks live in a plugin
// (plugin/, libtorch) that kernelgym loads with dlopen only when a command needs one, so `serve`,
// `runner` and every other command start without loading libtorch's ~290 shared libraries
// (PLATFORM.md: 335 ms and 170 MB per process) and never fork from a torch process.
//
// Inputs are plain float vectors in a FeatureLayout (features.h encodes them); the models never
// see a task, a protocol message or a file format other than their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/learned/feature_layout.h"

namespace kernelgym::learned {

// One decision point of the knob policy: the context, and a row per (knob, value) of the task's
// template. The distribution is one categorical per knob over its values (so always masked to
// the knob's domain: a value outside it has no row).
struct PolicyState {
  std::vector<float> context;                            // layout.context_size()
  std::vector<std::vector<std::vector<float>>> choices;  // [knob][value] -> layout.choice_size()
};

struct PolicyOutput {
  std::vector<std::vector<float>> probs;  // [knob][value]
  float value = 0;                        // the value head's estimate of the return
};

struct PpoConfig {
  double clip = 0.2;
  double value_coef = 0.5;
  double entropy_coef = 0.01;
  double max_grad_norm = 0.5;
};

struct UpdateStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
};

// The knob policy: a scorer of (context, choice) pairs giving each knob's logits, and a value head.
class PolicyModel {
 public:
  virtual ~PolicyModel() = default;
  virtual const FeatureLayout& layout() const = 0;
  // The distribution and value for each state; no gradient.
  virtual std::vector<PolicyOutput> Forward(const std::vector<const PolicyState*>& states) = 0;
  // One clipped-surrogate PPO gradient step on a minibatch. actions[i][k] is the value index
  // taken for knob k; old_logp the summed log-probability when it was taken.
  virtual UpdateStats PpoStep(const std::vector<const PolicyState*>& states, const std::vector<std::vector<int>>& actions,
                              const std::vector<float>& old_logp, const std::vector<float>& advantages,
                              const std::vector<float>& returns, const PpoConfig& config) = 0;
  // One behavior-cloning gradient step: the cross-entropy of `targets` (a setting per state).
  // Returns the mean loss.
  virtual double CloneStep(const std::vector<const PolicyState*>& states, const std::vector<std::vector<int>>& targets) = 0;
  // Writes the weights, the optimizer's state, the layout and `info` (provenance: what it was
  // trained on, how) to one file; false with `error`.
  virtual bool Save(const std::filesystem::path& file, const nlohmann::json& info, std::string& error) const = 0;
  virtual const nlohmann::json& info() const = 0;  // as saved (empty for a new model)
};

// The cost model's input: the task's features and a row per knob for the value it is set to.
struct CostInput {
  std::vector<float> task;                    // layout.task_size()
  std::vector<std::vector<float>> knob_rows;  // [knob] -> layout.choice_size()
};

// Predicts the log-speedup (against the task's reference) of a knob setting.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual const FeatureLayout& layout() const = 0;
  virtual std::vector<float> Predict(const std::vector<const CostInput*>& inputs) = 0;
  // One gradient step on the squared error; returns the mean loss.
  virtual double FitStep(const std::vector<const CostInput*>& inputs, const std::vector<float>& targets) = 0;
  virtual bool Save(const std::filesystem::path& file, const nlohmann::json& info, std::string& error) const = 0;
  virtual const nlohmann::json& info() const = 0;
};

struct ModelConfig {
  int hidden = 64;
  double learning_rate = 3e-4;
  uint64_t seed = 0;  // the initial weights; with one torch thread, training is deterministic
};

// The plugin's entry points (plugin/plugin.cc). The load functions refuse, with a message, a file
// that is not a kernelgym model, a model of the other kind, or one whose layout this build does
// not encode (FeatureLayout::FromJson).
struct ModelPlugin {
  int abi_version;
  std::unique_ptr<PolicyModel> (*create_policy)(const FeatureLayout& layout, const ModelConfig& config);
  std::unique_ptr<PolicyModel> (*load_policy)(const std::filesystem::path& file, double learning_rate, std::string& error);
  std::unique_ptr<CostModel> (*create_cost_model)(const FeatureLayout& layout, const ModelConfig& config);
  std::unique_ptr<CostModel> (*load_cost_model)(const std::filesystem::path& file, std::string& error);
};

inline constexpr int kModelPluginAbi = 1;
inline constexpr const char* kModelPluginSymbol = "kernelgym_learned_plugin";

// The plugin: $KERNELGYM_LEARNED_PLUGIN when set, else the one built with this binary. Loaded
// once and never unloaded; nullptr with `error` (the dlopen message) when it cannot be.
const ModelPlugin* LoadModelPlugin(std::string& error);

}  // namespace kernelgym::learned
