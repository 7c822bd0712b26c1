// The plugin's internal entry points, one per model kind (policy_model.cc, cost_model.cc), and
// what both share about the model file.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "policies/learned/model_api.h"

namespace kernelgym::learned::plugin {

std::unique_ptr<PolicyModel> CreatePolicy(const FeatureLayout& layout, const ModelConfig& config);
std::unique_ptr<PolicyModel> LoadPolicy(const std::filesystem::path& file, double learning_rate, std::string& error);
std::unique_ptr<CostModel> CreateCostModel(const FeatureLayout& layout, const ModelConfig& config);
std::unique_ptr<CostModel> LoadCostModel(const std::filesystem::path& file, std::string& error);

// The `kind` entry of a model file.
inline constexpr const char* kPolicyKind = "kernelgym-knob-policy";
inline constexpr const char* kCostModelKind = "kernelgym-cost-model";

}  // namespace kernelgym::learned::plugin
