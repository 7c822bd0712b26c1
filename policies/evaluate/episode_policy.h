// Policies as `kernelgym evaluate` and `kernelgym collect` run them: one interface, one episode
// per call, created by name from a registry (rewards/reward.h's RewardRegistry is the model).
// The built-in ones (RegisterBuiltinPolicies):
//   starter        submits the starter unchanged (the floor every other policy must beat)
//   random-knobs   `budget` random settings of the task's knob template, then submits the best
//   knob-search    beam search with the knobs proposer, `budget` evaluations, submits the best
//   mutate-search  beam search with the mutation proposer (no model), submits the best
//   learned-knobs  a trained knob policy (docs/learned.md) acting greedily, `budget` steps,
//                  submits the best; needs --policy-model
//   agent          the LLM agent (docs/agent.md), `budget` steps; needs --endpoint and --model
// A policy that cannot act on a task (no knob template for the knob policies) submits the
// starter, and says so in the outcome's status note. docs/adding_a_policy.md adds one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "env/client/client.h"
#include "policies/evaluate/report.h"
#include "policies/roles/assistant.h"

namespace kernelgym::evaluate {

struct EpisodeContext {
  protocol::TaskInfo task;  // tasks.get
  std::string backend = "cpu";
  uint64_t seed = 0;
  bool record = false;
  int budget = 16;                        // evaluations (search, random) or steps (agent, learned)
  roles::Assistant* assistant = nullptr;  // a chat model (PolicyNeeds::chat_model)
  std::string model;                      // its name, for the record
  std::filesystem::path policy_model;     // a trained knob policy file (PolicyNeeds::policy_model)
};

// What a policy needs beyond the environment. The commands check it for every --policy before
// the first episode, so a missing one is a clear error at start-up, not a failure mid-suite.
struct PolicyNeeds {
  bool chat_model = false;    // context.assistant: --endpoint URL --model NAME
  bool policy_model = false;  // context.policy_model: --policy-model FILE
};

class EpisodePolicy {
 public:
  virtual ~EpisodePolicy() = default;
  virtual std::string_view name() const = 0;
  // One episode on the context's task. Transport failures propagate; everything the environment
  // says (a failed kernel, a refused request) is in the outcome.
  virtual TaskOutcome Run(client::Client& env, const EpisodeContext& context, std::ostream& log) = 0;
};

class PolicyRegistry {
 public:
  using Factory = std::function<std::unique_ptr<EpisodePolicy>()>;
  struct Entry {
    std::string name;
    std::string description;  // one line, for --help
    PolicyNeeds needs;
    Factory factory;
  };

  static PolicyRegistry& Global();
  // A second registration of a name replaces the first.
  void Register(Entry entry);
  const Entry* Find(std::string_view name) const;
  std::vector<std::string> Names() const;  // in registration order
  // nullptr with `error` (naming the known policies) for an unknown name.
  std::unique_ptr<EpisodePolicy> Create(std::string_view name, std::string& error) const;
  // Whether `context` holds what the policy `name` needs; false with `error` naming the flags.
  bool Ready(std::string_view name, const EpisodeContext& context, std::string& error) const;
  // "starter, random-knobs, ...": for --help and messages.
  std::string NameList() const;

 private:
  std::vector<Entry> entries_;
};

// Registers the built-in policies (explicit, so that static linking keeps them; idempotent).
void RegisterBuiltinPolicies();

}  // namespace kernelgym::evaluate
