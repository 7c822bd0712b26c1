#include "policies/search/proposer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <sstream>

#include "core/backend_info.h"
#include "policies/learned/knob_space.h"
#include "policies/roles/reply_parsers.h"
#include "policies/roles/roles.h"
#include "policies/search/mutations.h"

namespace kernelgym::search {
namespace {

using nlohmann::json;

bool SettingInGraph(const SearchGraph& graph, const std::map<std::string, protocol::KnobValue>& setting) {
  for (const SearchNode& n : graph.nodes())
    if (!n.knobs.empty() && n.knobs == setting) return true;
  return false;
}

// Moves in the knob template: from a node made from the template, every setting that changes one
// knob; from any other node (the starter), the defaults and every one-knob change of them.
//
// With a cost model the neighbourhood is the whole template (up to kMaxRanked settings drawn at
// random from a larger one): every setting not yet evaluated, ranked by the model, so the search
// measures the settings it predicts fastest first and never measures the rest.
class KnobsProposer final : public Proposer {
 public:
  KnobsProposer(const protocol::TaskInfo& task, decltype(ProposerContext::score_knobs) score)
      : domains_(KnobDomains(task)), defaults_(KnobDefaults(task)), space_(learned::KnobSpace::FromTask(task)),
        score_(std::move(score)) {}
  std::string_view name() const override { return "knobs"; }

  std::vector<Proposal> Propose(const SearchGraph& graph, const SearchNode& node, int count,
                                std::mt19937_64& rng) override {
    if (score_) return Ranked(graph, count, rng);
    const auto& base = node.knobs.empty() ? defaults_ : node.knobs;
    std::vector<Proposal> moves;
    if (node.knobs.empty() && !SettingInGraph(graph, defaults_))
      moves.push_back({protocol::KnobsAction{defaults_}, "the template's defaults", defaults_, ""});
    for (const auto& [name, values] : domains_)
      for (const protocol::KnobValue& value : values) {
        if (base.count(name) && base.at(name) == value) continue;
        auto setting = base;
        setting[name] = value;
        if (SettingInGraph(graph, setting)) continue;
        const std::string from = base.count(name) ? protocol::KnobValueText(base.at(name)) : "?";
        moves.push_back({protocol::KnobsAction{setting}, name + " " + from + " -> " + protocol::KnobValueText(value), setting, ""});
      }
    std::shuffle(moves.begin(), moves.end(), rng);
    if (moves.size() > static_cast<std::size_t>(count)) moves.resize(static_cast<std::size_t>(count));
    return moves;
  }

 private:
  static constexpr uint64_t kMaxRanked = 4096;

  std::vector<Proposal> Ranked(const SearchGraph& graph, int count, std::mt19937_64& rng) {
    std::vector<std::map<std::string, protocol::KnobValue>> pool;
    if (space_.size() <= kMaxRanked) {
      for (const learned::Setting& s : space_.Enumerate()) pool.push_back(space_.ToKnobs(s));
    } else {
      for (uint64_t i = 0; i < kMaxRanked; ++i) pool.push_back(space_.ToKnobs(space_.Random(rng)));
    }
    std::erase_if(pool, [&](const auto& setting) { return SettingInGraph(graph, setting); });
    const std::vector<double> scores = score_(pool);
    std::vector<std::size_t> order(pool.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
    std::vector<Proposal> moves;
    std::set<std::string> seen;
    for (std::size_t i : order) {
      if (moves.size() >= static_cast<std::size_t>(count)) break;
      if (!seen.insert(space_.Key(*space_.FromKnobs(pool[i]))).second) continue;  // a repeated random draw
      char text[96];
      std::snprintf(text, sizeof(text), "cost model: predicted %.3gx the reference", std::exp(scores[i]));
      moves.push_back({protocol::KnobsAction{pool[i]}, text, pool[i], ""});
    }
    return moves;
  }

  std::map<std::string, std::vector<protocol::KnobValue>> domains_;
  std::map<std::string, protocol::KnobValue> defaults_;
  learned::KnobSpace space_;
  decltype(ProposerContext::score_knobs) score_;
};

// How much each operator tends to pay on a scalar CPU kernel: libm calls and serial reductions
// are what keeps -O3 from vectorizing, so those rewrites come first; unrolling and __restrict
// rarely matter to GCC at -O3, and `omp parallel for` only where a task allows threads. Mutants
// are drawn without replacement with these weights (a prior, not a filter: all get their turn).
double OperatorWeight(const Mutation& m) {
  if (m.op == "exp_poly") return 8;
  if (m.op == "omp_simd") return m.description.find("reduction") != std::string::npos ? 6 : 3;
  if (m.op == "hoist_division") return 2;
  return 1;
}

class MutateProposer final : public Proposer {
 public:
  std::string_view name() const override { return "mutate"; }
  std::vector<Proposal> Propose(const SearchGraph& graph, const SearchNode& node, int count,
                                std::mt19937_64& rng) override {
    std::vector<Proposal> out;
    std::vector<Mutation> mutants = EnumerateMutations(node.source);
    // Weighted sampling without replacement (Efraimidis-Spirakis): sort by u^(1/w), largest first.
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<std::pair<double, std::size_t>> keys;
    for (std::size_t i = 0; i < mutants.size(); ++i)
      keys.emplace_back(std::pow(uniform(rng), 1.0 / OperatorWeight(mutants[i])), i);
    std::sort(keys.begin(), keys.end(), std::greater<>());
    std::vector<Mutation> ordered;
    for (const auto& [key, i] : keys) ordered.push_back(std::move(mutants[i]));
    mutants = std::move(ordered);
    for (Mutation& m : mutants) {
      if (static_cast<int>(out.size()) >= count) break;
      if (graph.HasSource(m.source)) continue;
      out.push_back({protocol::ReplaceAction{m.source}, m.description, {}, m.source});
    }
    return out;
  }
};

// The implementer, asked to apply one strategy from the list to the node's kernel. Exactly
// `count` strategies are asked about, concurrently (the chat client bounds the requests in flight
// by --llm-concurrency). A reply that repeats a kernel already in the graph is refused before it
// costs an evaluation, and answered with a repair turn that says so.
class LlmProposer final : public Proposer {
 public:
  LlmProposer(const ProposerContext& context, std::vector<std::string> strategies)
      : context_(context), strategies_(std::move(strategies)) {}
  std::string_view name() const override { return "llm"; }
  bool costly() const override { return true; }

  std::vector<Proposal> Propose(const SearchGraph& graph, const SearchNode& node, int count,
                                std::mt19937_64& rng) override {
    std::vector<std::string> order = strategies_;
    std::shuffle(order.begin(), order.end(), rng);
    if (order.size() > static_cast<std::size_t>(std::max(0, count))) order.resize(static_cast<std::size_t>(std::max(0, count)));
    std::vector<std::future<std::optional<Proposal>>> asks;
    for (const std::string& strategy : order) {
      asks.push_back(std::async(std::launch::async, [&, strategy] { return Ask(graph, node, strategy); }));
    }
    std::vector<Proposal> out;
    for (auto& ask : asks) {
      if (std::optional<Proposal> proposal = ask.get()) out.push_back(std::move(*proposal));
    }
    return out;
  }

  std::vector<roles::Exchange> TakeUnproductiveExchanges() override {
    std::lock_guard lock(mutex_);
    return std::exchange(unproductive_, {});
  }

  std::string unusable() const override { return context_.assistant->unusable(); }

 private:
  std::optional<Proposal> Ask(const SearchGraph& graph, const SearchNode& node, const std::string& strategy) {
    roles::Variables v = roles::TaskVariables(context_.task, context_.backend, context_.assistant->roles());
    v["source"] = node.source;
    v["observation"] = "status: " + node.status + (node.ok() ? ", " + std::to_string(node.speedup) + "x the reference" : "") +
                       (node.message.empty() ? "" : "\n" + node.message);
    v["note"] = "Apply this optimization strategy, and only this one: " + strategy;
    v["best_speedup"] = std::to_string(node.speedup);
    const std::string entry_point = roles::EntryPoint(context_.task.summary.signature);
    std::optional<protocol::Action> action;
    std::vector<roles::Exchange> exchanges;
    std::string error;
    context_.assistant->Ask(
        roles::Role::kImplementer, v,
        [&](const std::string& reply) -> std::string {
          roles::ActionOrError parsed = roles::ParseKernelEdit(reply, context_.backend, entry_point);
          if (!parsed.action) return parsed.error;
          if (const auto* replace = std::get_if<protocol::ReplaceAction>(&*parsed.action)) {
            if (const std::optional<int> same = graph.NodeWithSource(replace->source)) {
              return "this kernel is identical to one already evaluated (node " + std::to_string(*same) + ", " +
                     graph.node(*same).status + "); write a different kernel that applies the strategy";
            }
          }
          action = std::move(parsed.action);
          return "";
        },
        exchanges, error);
    if (!action) {
      std::lock_guard lock(mutex_);
      for (roles::Exchange& e : exchanges) unproductive_.push_back(std::move(e));  // already marked: no step
      return std::nullopt;
    }
    std::string source;
    if (const auto* replace = std::get_if<protocol::ReplaceAction>(&*action)) source = replace->source;
    return Proposal{*action, strategy, {}, source, std::move(exchanges)};
  }

  ProposerContext context_;
  std::vector<std::string> strategies_;
  std::mutex mutex_;
  std::vector<roles::Exchange> unproductive_;  // guarded by mutex_
};

std::vector<std::string> ReadStrategies(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("- ", 0) == 0) out.push_back(line.substr(2));
  return out;
}

}  // namespace

protocol::TaskInfo TaskForBackend(protocol::TaskInfo task, const std::string& backend) {
  return learned::TaskForBackend(std::move(task), backend);
}

std::map<std::string, std::vector<protocol::KnobValue>> KnobDomains(const protocol::TaskInfo& task) {
  const learned::KnobSpace space = learned::KnobSpace::FromTask(task);
  std::map<std::string, std::vector<protocol::KnobValue>> out;
  for (std::size_t k = 0; k < space.knobs(); ++k) out[space.name(k)] = space.values(k);
  return out;
}

std::map<std::string, protocol::KnobValue> KnobDefaults(const protocol::TaskInfo& task) {
  const learned::KnobSpace space = learned::KnobSpace::FromTask(task);
  return space.ToKnobs(space.defaults());
}

std::filesystem::path DefaultStrategiesDir() {
  if (const char* env = std::getenv("KERNELGYM_STRATEGIES"); env && *env) return env;
  return KERNELGYM_STRATEGIES_DIR;
}

const std::vector<std::string>& ProposerNames() {
  static const std::vector<std::string> names = {"knobs", "mutate", "llm"};
  return names;
}

std::unique_ptr<Proposer> CreateProposer(std::string_view name, const ProposerContext& context, std::string& error) {
  const std::string task = context.task.summary.id;
  if (name == "knobs") {
    if (KnobDomains(context.task).empty()) {
      error = "task " + task + " has no knob template: the knobs proposer has nothing to move (try mutate or llm)";
      return nullptr;
    }
    return std::make_unique<KnobsProposer>(context.task, context.score_knobs);
  }
  if (name == "mutate") {
    if (!BackendInfoOr(context.backend).source_mutations) {
      error = "the mutate proposer rewrites C++ kernels: backend '" + context.backend + "' is not supported";
      return nullptr;
    }
    return std::make_unique<MutateProposer>();
  }
  if (name == "llm") {
    if (!context.assistant) {
      error = "the llm proposer needs a model: --endpoint URL --model NAME";
      return nullptr;
    }
    const std::filesystem::path file = context.strategies_dir / (context.backend + ".md");
    std::vector<std::string> strategies = ReadStrategies(file);
    if (strategies.empty()) {
      error = "no strategies (lines starting with \"- \") in " + file.string();
      return nullptr;
    }
    return std::make_unique<LlmProposer>(context, std::move(strategies));
  }
  error = "unknown proposer '" + std::string(name) + "' (knobs, mutate, llm)";
  return nullptr;
}

}  // namespace kernelgym::search
