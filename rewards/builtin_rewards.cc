// The built-in rewards. Each is a few lines of policy over the result record; the shared parts
// (reading a config strictly, penalties per outcome, the speedup paid for) are at the top.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "rewards/reward.h"

namespace kernelgym {
namespace {

using nlohmann::json;

// Reads a reward's JSON config: typed fields with defaults and bounds; any field it does not
// know is an error, so a typo in a config never silently falls back to a default.
class ConfigReader {
 public:
  ConfigReader(const json& config, std::string reward, std::string& error)
      : config_(config), reward_(std::move(reward)), error_(error) {}

  double Number(const std::string& key, double fallback, double min, double max) {
    known_.insert(key);
    if (!config_.contains(key)) return fallback;
    const json& v = config_[key];
    if (!v.is_number()) return Fail(key, "must be a number"), fallback;
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max)
      return Fail(key, "must be within [" + Str(min) + ", " + Str(max) + "]"), fallback;
    return x;
  }

  bool Bool(const std::string& key, bool fallback) {
    known_.insert(key);
    if (!config_.contains(key)) return fallback;
    if (!config_[key].is_boolean()) return Fail(key, "must be true or false"), fallback;
    return config_[key].get<bool>();
  }

  // Whether a trusted TPU estimate may be paid for where no clock of the target ran (pallas off a
  // TPU): every speed reward reads it as "estimated_speedup", default true.
  bool EstimatedSpeedup() { return Bool("estimated_speedup", true); }

  // Penalties per failure outcome under "penalties": {...}, each below `ceiling` — the lowest a
  // correct kernel can score — so that no configuration pays a policy to fail (the ordering
  // contract, docs/adding_a_reward.md).
  std::map<Outcome, double> Penalties(double compile, double incorrect, double crash, double violation,
                                      double implausible, double ceiling) {
    std::map<Outcome, double> p{{Outcome::kCompileFailure, compile}, {Outcome::kIncorrect, incorrect},
                                {Outcome::kCrash, crash},            {Outcome::kViolation, violation},
                                {Outcome::kImplausible, implausible}};
    known_.insert("penalties");
    if (!config_.contains("penalties")) return p;
    const json& given = config_["penalties"];
    if (!given.is_object()) return Fail("penalties", "must be an object"), p;
    for (const auto& [key, value] : given.items()) {
      bool matched = false;
      for (auto& [outcome, penalty] : p) {
        if (OutcomeName(outcome) != key) continue;
        matched = true;
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() >= ceiling)
          Fail("penalties." + key, "must be a number below " + Str(ceiling) +
                                       ", the least a correct kernel scores: a failure must never outrank a correct kernel");
        else
          penalty = value.get<double>();
      }
      if (!matched) Fail("penalties." + key, "is not an outcome (compile_failure, incorrect, crash, violation, implausible)");
    }
    return p;
  }

  // True when the config was valid; reports the first unknown field otherwise.
  bool Finish() {
    for (const auto& [key, value] : config_.items())
      if (!known_.count(key)) Fail(key, "is not a field of this reward");
    return error_.empty();
  }

 private:
  void Fail(const std::string& field, const std::string& message) {
    if (error_.empty()) error_ = "reward '" + reward_ + "': " + field + ": " + message;
  }
  static std::string Str(double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", x);
    return buf;
  }

  const json& config_;
  std::string reward_;
  std::string& error_;
  std::set<std::string> known_;
};

constexpr double kMaxCap = 1e6;

// The failure rungs of the default reward (docs/adding_a_reward.md, "The ordering contract"):
// each stage a kernel gets through is progress toward a correct one, so a wrong answer (compiled
// and ran) is paid more than a crash or timeout (compiled), which is paid more than a compile
// failure; a sandbox violation or an implausible result (an attempt at the judge) is paid least,
// so that cheating is never the cheaper failure.
constexpr double kIncorrectPenalty = -0.1, kCrashPenalty = -0.2, kCompilePenalty = -0.3, kCheatPenalty = -1;

// The speedup a reward pays for (RewardableSpeedupOf): measured, or a trusted estimate where the
// env allows it; 0 when there is none.
double PaidSpeedup(const EvalResult& r, bool estimated_allowed) {
  const RewardableSpeedup s = RewardableSpeedupOf(r);
  return s.kind == SpeedupKind::kEstimated && !estimated_allowed ? 0 : s.value;
}

double MinPenalty(const std::map<Outcome, double>& penalties) {
  double m = 0;
  for (const auto& [o, p] : penalties) m = std::min(m, p);
  return m;
}

// A penalty for failures, 0 for environment errors (not the policy's fault).
double PenaltyFor(const std::map<Outcome, double>& penalties, Outcome outcome) {
  auto it = penalties.find(outcome);
  return it == penalties.end() ? 0 : it->second;
}

class Speedup final : public Reward {
 public:
  Speedup(double cap, bool estimated) : cap_(cap), estimated_(estimated) {}
  double Compute(const RewardContext& c) const override { return std::min(PaidSpeedup(c.result, estimated_), cap_); }
  RewardRange range() const override { return {0, cap_}; }

 private:
  double cap_;
  bool estimated_;
};

class LogSpeedup final : public Reward {
 public:
  LogSpeedup(double cap, std::map<Outcome, double> penalties, bool estimated)
      : log_cap_(std::log(cap)), penalties_(std::move(penalties)), estimated_(estimated) {}
  double Compute(const RewardContext& c) const override {
    const Outcome o = OutcomeOf(c.result);
    if (o != Outcome::kCorrect) return PenaltyFor(penalties_, o);
    const double s = PaidSpeedup(c.result, estimated_);
    return s > 0 ? std::clamp(std::log(s), -log_cap_, log_cap_) : 0;
  }
  RewardRange range() const override { return {std::min(MinPenalty(penalties_), -log_cap_), log_cap_}; }

 private:
  double log_cap_;
  std::map<Outcome, double> penalties_;
  bool estimated_;
};

// Improvement over the best so far, in log-speedup, never negative: the sum over an episode is
// the log of the final best over the starting point, whatever the path.
class LogSpeedupGain final : public Reward {
 public:
  LogSpeedupGain(double cap, std::map<Outcome, double> penalties, bool estimated)
      : log_cap_(std::log(cap)), penalties_(std::move(penalties)), estimated_(estimated) {}
  double Compute(const RewardContext& c) const override {
    const Outcome o = OutcomeOf(c.result);
    if (o != Outcome::kCorrect) return PenaltyFor(penalties_, o);
    const double s = PaidSpeedup(c.result, estimated_);
    if (s <= 0 || c.best_speedup <= 0 || !std::isfinite(c.best_speedup)) return 0;
    return std::clamp(std::log(s) - std::log(c.best_speedup), 0.0, log_cap_);
  }
  RewardRange range() const override { return {MinPenalty(penalties_), log_cap_}; }

 private:
  double log_cap_;
  std::map<Outcome, double> penalties_;
  bool estimated_;
};

// 1 when correct and faster than p, 0 when correct but not, penalties below 0 when failing: a
// threshold still tells a correct kernel from a broken one.
class FastP final : public Reward {
 public:
  FastP(double p, std::map<Outcome, double> penalties, bool estimated)
      : p_(p), penalties_(std::move(penalties)), estimated_(estimated) {}
  double Compute(const RewardContext& c) const override {
    const Outcome o = OutcomeOf(c.result);
    if (o != Outcome::kCorrect) return PenaltyFor(penalties_, o);
    return PaidSpeedup(c.result, estimated_) > p_ ? 1 : 0;
  }
  RewardRange range() const override { return {MinPenalty(penalties_), 1}; }

 private:
  double p_;
  std::map<Outcome, double> penalties_;
  bool estimated_;
};

class Piecewise final : public Reward {
 public:
  Piecewise(std::map<Outcome, double> penalties, double slower, double faster, double per_speedup, double cap,
            bool estimated)
      : penalties_(std::move(penalties)), slower_(slower), faster_(faster), per_speedup_(per_speedup), cap_(cap),
        estimated_(estimated) {}
  double Compute(const RewardContext& c) const override {
    const Outcome o = OutcomeOf(c.result);
    if (o != Outcome::kCorrect) return PenaltyFor(penalties_, o);
    const double s = PaidSpeedup(c.result, estimated_);
    if (s <= 1) return slower_;
    return faster_ + per_speedup_ * (std::min(s, cap_) - 1);
  }
  RewardRange range() const override {
    return {std::min({MinPenalty(penalties_), slower_, faster_}),
            std::max(slower_, faster_ + per_speedup_ * (cap_ - 1))};
  }

 private:
  std::map<Outcome, double> penalties_;
  double slower_, faster_, per_speedup_, cap_;
  bool estimated_;
};

// Per-turn score for discounted multi-turn training (as Kevin-32B's: a bonus for a correct
// kernel plus its speedup); the trainer discounts and sums over turns.
class Kevin final : public Reward {
 public:
  Kevin(double correct_weight, double cap, bool estimated) : correct_weight_(correct_weight), cap_(cap), estimated_(estimated) {}
  double Compute(const RewardContext& c) const override {
    if (OutcomeOf(c.result) != Outcome::kCorrect) return 0;
    return correct_weight_ + std::min(PaidSpeedup(c.result, estimated_), cap_);
  }
  RewardRange range() const override { return {0, correct_weight_ + cap_}; }

 private:
  double correct_weight_, cap_;
  bool estimated_;
};

}  // namespace

void RegisterBuiltinRewards() {
  RewardRegistry& r = RewardRegistry::Global();
  r.Register("log_speedup_gain",
             "gain in log-speedup over the best so far (>= 0); penalties for failures. The default.",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "log_speedup_gain", error);
               const double cap = c.Number("cap", 100, 1.0001, kMaxCap);
               auto penalties = c.Penalties(kCompilePenalty, kIncorrectPenalty, kCrashPenalty, kCheatPenalty, kCheatPenalty,
                                            /*ceiling=*/0);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<LogSpeedupGain>(cap, std::move(penalties), estimated);
             });
  r.Register("speedup", "the speedup over the reference when correct, else 0; capped",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "speedup", error);
               const double cap = c.Number("cap", 100, 1.0001, kMaxCap);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<Speedup>(cap, estimated);
             });
  r.Register("log_speedup", "log of the speedup when correct (clamped to +-log cap), else a penalty",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "log_speedup", error);
               const double cap = c.Number("cap", 100, 1.0001, kMaxCap);
               // Below the floor of a correct kernel (-log cap), by the same rungs as the default's.
               const double floor = -std::log(cap);
               auto penalties = c.Penalties(floor - 1.5, floor - 0.5, floor - 1, floor - 3, floor - 3, /*ceiling=*/floor);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<LogSpeedup>(cap, std::move(penalties), estimated);
             });
  r.Register("fast_p", "1 when correct and faster than p times the reference, else 0",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "fast_p", error);
               const double p = c.Number("p", 1.0, 0, kMaxCap);
               auto penalties = c.Penalties(kCompilePenalty, kIncorrectPenalty, kCrashPenalty, kCheatPenalty, kCheatPenalty,
                                            /*ceiling=*/0);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<FastP>(p, std::move(penalties), estimated);
             });
  r.Register("piecewise", "a schedule: penalties for failures, `slower` when correct but not faster, "
                          "`faster` + per_speedup * (speedup - 1) when faster (speedup capped)",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "piecewise", error);
               const double slower = c.Number("slower", 0.1, -1e3, 1e3);
               const double faster = c.Number("faster", 1.0, -1e3, 1e3);
               auto penalties = c.Penalties(-1, -0.5, -0.75, -2, -2, /*ceiling=*/std::min(slower, faster));
               const double per_speedup = c.Number("per_speedup", 1.0, 0, 1e3);
               const double cap = c.Number("cap", 10, 1.0001, kMaxCap);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<Piecewise>(std::move(penalties), slower, faster, per_speedup, cap, estimated);
             });
  r.Register("kevin", "per-turn score for multi-turn training: correct_weight + speedup when correct, else 0",
             [](const json& config, std::string& error) -> std::unique_ptr<Reward> {
               ConfigReader c(config, "kevin", error);
               // Above 0: a correct kernel without a speed figure must still outrank a failing one (0).
               const double weight = c.Number("correct_weight", 0.3, 1e-6, 1e3);
               const double cap = c.Number("cap", 10, 1.0001, kMaxCap);
               const bool estimated = c.EstimatedSpeedup();
               if (!c.Finish()) return nullptr;
               return std::make_unique<Kevin>(weight, cap, estimated);
             });
}

}  // namespace kernelgym
