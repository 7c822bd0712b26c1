// The reward interface: one evaluation (and the episode's best so far) in, one number out.
// Rewards are looked up by name in a registry and configured by a JSON object per env
// (docs/adding_a_reward.md). A reward never sees a kernel or a process: only the result record.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace kernelgym {

struct RewardContext {
  const EvalResult& result;  // this step's evaluation
  // Best correct speedup earlier in the episode (the starter's after reset) of the same kind as
  // this result's (measured or estimated: RewardableSpeedupOf); 0: none.
  double best_speedup = 0;
  int step = 0;              // 1-based step index
  int max_steps = 0;
  bool submit = false;       // the final, stricter evaluation
};

struct RewardRange {
  double min = 0;
  double max = 0;
};

// How a result counts, whatever the reward: the outcome classes rewards assign penalties to.
enum class Outcome { kCorrect, kCompileFailure, kIncorrect, kCrash, kViolation, kImplausible, kEnvironmentError };
Outcome OutcomeOf(const EvalResult& result);
std::string_view OutcomeName(Outcome outcome);

class Reward {
 public:
  virtual ~Reward() = default;
  // Finite, deterministic, within range() for every result — the conformance test holds every
  // registered reward to this. Environment errors (internal_error) are never penalized.
  virtual double Compute(const RewardContext& context) const = 0;
  virtual RewardRange range() const = 0;
};

// Builds a reward from its JSON config ({} = defaults). On a bad config returns nullptr and sets
// `error` naming the field.
using RewardFactory = std::function<std::unique_ptr<Reward>(const nlohmann::json& config, std::string& error)>;

class RewardRegistry {
 public:
  static RewardRegistry& Global();
  void Register(const std::string& name, const std::string& description, RewardFactory factory);
  std::unique_ptr<Reward> Create(const std::string& name, const nlohmann::json& config, std::string& error) const;
  std::vector<std::string> Names() const;
  std::string Description(const std::string& name) const;

 private:
  struct Entry {
    std::string name, description;
    RewardFactory factory;
  };
  std::vector<Entry> entries_;
};

// Registers the built-in rewards (explicit, so static linking keeps them).
void RegisterBuiltinRewards();

inline constexpr const char* kDefaultReward = "log_speedup_gain";

}  // namespace kernelgym
