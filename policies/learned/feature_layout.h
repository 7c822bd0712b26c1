// What a learned model's inputs mean: which observation features it reads (by name, from the
// server's hello `feature_names`), the task categories, knob names and string knob values it
// has a one-hot slot for. Saved inside every model file, so a model is only ever fed the inputs
// it was trained on; anything else is a clear error at load time, not a silent wrong input.
// Compiled into both the torch-free trainer and the torch plugin (plugin/): no torch here.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kernelgym::learned {

// Bumped whenever the encoding in features.cc changes meaning (an input added, moved or scaled):
// a model of another version is refused, never fed inputs it was not trained on.
inline constexpr int kFeatureLayoutVersion = 1;

struct FeatureLayout {
  int version = kFeatureLayoutVersion;
  std::vector<std::string> observation;   // observation features read, in this order
  std::vector<std::string> categories;    // task categories with a one-hot slot (+1 for any other)
  std::vector<std::string> knob_names;    // knob names with a one-hot slot (+1 for any other)
  std::vector<std::string> value_tokens;  // string knob values with a one-hot slot (+1 for any other)

  // Inputs describing the task alone (the cost model's context; part of the policy's).
  std::size_t task_size() const;
  // The policy's context: observation features + task features + episode features.
  std::size_t context_size() const;
  // One (knob, value) choice: knob-name one-hot, value features, value-token one-hot.
  std::size_t choice_size() const;

  nlohmann::json ToJson() const;
  // nullopt with `error` naming the field; a version other than kFeatureLayoutVersion is an error.
  static std::optional<FeatureLayout> FromJson(const nlohmann::json& json, std::string& error);
  bool operator==(const FeatureLayout&) const = default;
};

// Episode features the trainer adds after the observation and task features.
inline constexpr std::size_t kEpisodeFeatures = 3;  // step fraction, log gain of the best, of the last
// Value features of a choice between its two one-hots.
inline constexpr std::size_t kValueFeatures = 6;
// Task features after the category one-hot.
inline constexpr std::size_t kTaskScalars = 5;

}  // namespace kernelgym::learned
