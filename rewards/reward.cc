#include "rewards/reward.h"

namespace kernelgym {

Outcome OutcomeOf(const EvalResult& result) {
  switch (result.status) {
    case Status::kOk: return Outcome::kCorrect;
    case Status::kRejected:
    case Status::kCompileError: return Outcome::kCompileFailure;
    case Status::kIncorrect: return Outcome::kIncorrect;
    case Status::kCrashed:
    case Status::kTimeout: return Outcome::kCrash;
    case Status::kSandboxViolation: return Outcome::kViolation;
    case Status::kImplausible: return Outcome::kImplausible;
    case Status::kInternalError: return Outcome::kEnvironmentError;
  }
  return Outcome::kEnvironmentError;
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCorrect: return "correct";
    case Outcome::kCompileFailure: return "compile_failure";
    case Outcome::kIncorrect: return "incorrect";
    case Outcome::kCrash: return "crash";
    case Outcome::kViolation: return "violation";
    case Outcome::kImplausible: return "implausible";
    case Outcome::kEnvironmentError: return "environment_error";
  }
  return "?";
}

RewardRegistry& RewardRegistry::Global() {
  static RewardRegistry registry;
  return registry;
}

void RewardRegistry::Register(const std::string& name, const std::string& description, RewardFactory factory) {
  for (Entry& e : entries_)
    if (e.name == name) {
      e = {name, description, std::move(factory)};
      return;
    }
  entries_.push_back({name, description, std::move(factory)});
}

std::unique_ptr<Reward> RewardRegistry::Create(const std::string& name, const nlohmann::json& config,
                                               std::string& error) const {
  for (const Entry& e : entries_) {
    if (e.name != name) continue;
    if (!config.is_object()) {
      error = "reward '" + name + "': config must be a JSON object";
      return nullptr;
    }
    std::unique_ptr<Reward> reward = e.factory(config, error);
    if (!reward && error.empty()) error = "reward '" + name + "': invalid config";
    return reward;
  }
  error = "unknown reward '" + name + "'";
  return nullptr;
}

std::vector<std::string> RewardRegistry::Names() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

std::string RewardRegistry::Description(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return e.description;
  return {};
}

}  // namespace kernelgym
