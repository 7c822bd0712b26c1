#include "policies/learned/feature_layout.h"

namespace kernelgym::learned {

std::size_t FeatureLayout::task_size() const { return categories.size() + 1 + kTaskScalars; }

std::size_t FeatureLayout::context_size() const { return observation.size() + task_size() + kEpisodeFeatures; }

std::size_t FeatureLayout::choice_size() const {
  return knob_names.size() + 1 + kValueFeatures + value_tokens.size() + 1;
}

nlohmann::json FeatureLayout::ToJson() const {
  return {{"format", "kernelgym-learned-features"}, {"version", version},         {"observation", observation},
          {"categories", categories},                {"knob_names", knob_names}, {"value_tokens", value_tokens}};
}

std::optional<FeatureLayout> FeatureLayout::FromJson(const nlohmann::json& json, std::string& error) {
  if (!json.is_object() || json.value("format", "") != "kernelgym-learned-features") {
    error = "not a kernelgym feature layout (no \"format\": \"kernelgym-learned-features\")";
    return std::nullopt;
  }
  FeatureLayout layout;
  if (!json.contains("version") || !json["version"].is_number_integer()) {
    error = "feature layout: 'version' is missing or not an integer";
    return std::nullopt;
  }
  layout.version = json["version"].get<int>();
  if (layout.version != kFeatureLayoutVersion) {
    error = "feature layout version " + std::to_string(layout.version) + ", but this kernelgym encodes version " +
            std::to_string(kFeatureLayoutVersion) + ": the model was trained on inputs this build does not produce (retrain it)";
    return std::nullopt;
  }
  for (auto [field, out] : {std::pair{"observation", &layout.observation}, std::pair{"categories", &layout.categories},
                            std::pair{"knob_names", &layout.knob_names}, std::pair{"value_tokens", &layout.value_tokens}}) {
    const auto it = json.find(field);
    if (it == json.end() || !it->is_array()) {
      error = std::string("feature layout: '") + field + "' is missing or not an array";
      return std::nullopt;
    }
    for (const nlohmann::json& name : *it) {
      if (!name.is_string()) {
        error = std::string("feature layout: '") + field + "' holds a non-string";
        return std::nullopt;
      }
      out->push_back(name.get<std::string>());
    }
  }
  return layout;
}

}  // namespace kernelgym::learned
