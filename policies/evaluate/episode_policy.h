// Policies as `kernelgym evaluate` and `kernelgym collect` run them: one interface, one episode
// per call, found by name (PolicyNames()):
//   starter        submits the starter unchanged (the floor every other policy must beat)
//   random-knobs   `budget` random settings of the task's knob template, then submits the best
//   knob-search    beam search with the knobs proposer, `budget` evaluations, submits the best
//   mutate-search  beam search with the mutation proposer (no model), submits the best
//   agent          the LLM agent (docs/agent.md), `budget` steps; needs --endpoint and --model
// A policy that cannot act on a task (no knob template for random-knobs / knob-search) submits the
// starter, and says so in the outcome's status note.
#pragma once

#include <cstdint>
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
  nlohmann::json task;  // tasks.get
  std::string backend = "cpu";
  uint64_t seed = 0;
  bool record = false;
  int budget = 16;                        // evaluations (search, random) or steps (agent)
  roles::Assistant* assistant = nullptr;  // agent
  std::string model;                      // agent, for the record
};

class EpisodePolicy {
 public:
  virtual ~EpisodePolicy() = default;
  virtual std::string_view name() const = 0;
  // One episode on the context's task. Transport failures propagate; everything the environment
  // says (a failed kernel, a refused request) is in the outcome.
  virtual TaskOutcome Run(client::Client& env, const EpisodeContext& context, std::ostream& log) = 0;
};

const std::vector<std::string>& PolicyNames();
// nullptr with `error` for an unknown name.
std::unique_ptr<EpisodePolicy> CreatePolicy(std::string_view name, std::string& error);

}  // namespace kernelgym::evaluate
