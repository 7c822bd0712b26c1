// Proposers: where a search's children come from. One interface, three implementations found by
// name (ProposerNames()):
//   knobs   moves in the task's knob template: one knob changed to another value of its domain;
//           with a cost model (`score_knobs`), the template's unevaluated settings ranked by the
//           model instead, best predicted first (docs/learned.md)
//   mutate  source mutations that need no model (mutations.h): SIMD pragmas, unrolling,
//           __restrict, a polynomial exp, hoisted divisions, parallel loops
//   llm     the implementer role, conditioned on a strategy drawn from the backend's strategy list
//           (strategies/<backend>.md), through any OpenAI-compatible endpoint
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "env/protocol/messages.h"
#include "policies/roles/assistant.h"
#include "policies/search/graph.h"

namespace kernelgym::search {

struct Proposal {
  protocol::Action action;
  std::string strategy;                              // the edge in words
  std::map<std::string, protocol::KnobValue> knobs;  // the setting, for a knob move
  std::string source;  // the resulting source when the proposer knows it (replace), for dedup; else ""
  std::vector<roles::Exchange> exchanges;  // the chat calls behind this proposal (llm), recorded with its step
};

struct ProposerContext {
  protocol::TaskInfo task;  // tasks.get
  std::string backend = "cpu";
  roles::Assistant* assistant = nullptr;  // required by `llm`
  std::filesystem::path strategies_dir;   // `llm`: holds <backend>.md
  // `knobs`: when set, a cost model's predicted log-speedup for each setting (higher is better).
  std::function<std::vector<double>(const std::vector<std::map<std::string, protocol::KnobValue>>&)> score_knobs;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string_view name() const = 0;
  // Up to `count` proposals to expand `node` into, none already in `graph` (same source or the
  // same knob setting); fewer, or none, when the node's neighbourhood is exhausted. Thread-safe:
  // a search asks for several nodes' proposals at once (each call with its own rng), while the
  // graph is not being changed.
  virtual std::vector<Proposal> Propose(const SearchGraph& graph, const SearchNode& node, int count,
                                        std::mt19937_64& rng) = 0;
  // Whether each proposal costs something (a model call): a search then asks for exactly the
  // proposals it will evaluate, rather than drawing extras to choose from.
  virtual bool costly() const { return false; }
  // The chat exchanges that produced no proposal (no usable reply), marked as such, to be recorded
  // with a later step; moved out.
  virtual std::vector<roles::Exchange> TakeUnproductiveExchanges() { return {}; }
  // Why this proposer cannot propose any more, whatever the node ("" while it can): its model
  // endpoint refused for good or a budget is spent (roles::Assistant::unusable()).
  virtual std::string unusable() const { return ""; }
};

const std::vector<std::string>& ProposerNames();  // "knobs", "mutate", "llm"
// $KERNELGYM_STRATEGIES when set, else the source tree's policies/search/strategies.
std::filesystem::path DefaultStrategiesDir();
// nullptr with `error` for an unknown name or a context the proposer cannot work with (no knob
// template for `knobs`, no model for `llm`, a backend `mutate` does not know).
std::unique_ptr<Proposer> CreateProposer(std::string_view name, const ProposerContext& context, std::string& error);

// The task as a knob policy on `backend` sees it: its top-level knobs made that backend's template
// (on a backend whose tasks come from a subfolder, pallas, that version's knobs, or none; on cpu
// task.json's). The knobs proposer, the ranker and the evaluate policies read the top level.
protocol::TaskInfo TaskForBackend(protocol::TaskInfo task, const std::string& backend);

// The task's knob template: name -> its values, and the defaults (empty when it has none).
std::map<std::string, std::vector<protocol::KnobValue>> KnobDomains(const protocol::TaskInfo& task);
std::map<std::string, protocol::KnobValue> KnobDefaults(const protocol::TaskInfo& task);

}  // namespace kernelgym::search
