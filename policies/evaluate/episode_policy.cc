#include "policies/evaluate/episode_policy.h"

#include <chrono>
#include <random>
#include <sstream>

#include "policies/agent/agent.h"
#include "policies/evaluate/episode_steps.h"
#include "policies/evaluate/learned_policy.h"
#include "policies/search/proposer.h"
#include "policies/search/search.h"

namespace kernelgym::evaluate {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string StartEpisode(client::Client& env, const EpisodeContext& c, int max_steps, protocol::Observation& first) {
  protocol::EnvMakeRequest make;
  make.task = c.task.summary.id;
  make.backend = c.backend;
  make.max_steps = max_steps;
  make.record = c.record;
  const std::string id = env.Make(make).env;
  const protocol::ResetResult reset = env.Reset(id, c.seed);
  first = reset.observation;
  std::string kind;
  first.speedup = PaidSpeedup(first, reset.info, kind);
  return id;
}


protocol::Observation Paid(const protocol::StepResult& r, TaskOutcome& out) {
  protocol::Observation o = r.observation;
  std::string kind;
  o.speedup = PaidSpeedup(o, r.info, kind);
  if (!kind.empty()) out.speedup_kind = kind;
  return o;
}

void SubmitBest(client::Client& env, const std::string& id, int64_t current_step, int64_t best_step, TaskOutcome& out,
                const std::string& policy) {
  if (current_step != best_step) {
    env.Step(id, protocol::RevertAction{best_step}, {{"policy", policy}});
    ++out.steps;
  }
  const protocol::StepResult submit = env.Step(id, protocol::SubmitAction{}, {{"policy", policy}});
  ++out.steps;
  const protocol::Observation o = Paid(submit, out);
  out.status = o.status;
  out.correct = o.status == "ok";
  out.speedup = out.correct ? o.speedup : 0;
  env.Close(id);
}

TaskOutcome SubmitStarter(client::Client& env, const EpisodeContext& c, const std::string& policy) {
  const auto start = Clock::now();
  TaskOutcome out;
  out.task = c.task.summary.id;
  protocol::Observation first;
  const std::string id = StartEpisode(env, c, 2, first);
  out.starter_speedup = out.best_speedup = first.speedup;
  SubmitBest(env, id, 0, 0, out, policy);
  out.seconds = SecondsSince(start);
  return out;
}

namespace {

class StarterPolicy final : public EpisodePolicy {
 public:
  std::string_view name() const override { return "starter"; }
  TaskOutcome Run(client::Client& env, const EpisodeContext& c, std::ostream&) override {
    return SubmitStarter(env, c, "starter");
  }
};

class RandomKnobsPolicy final : public EpisodePolicy {
 public:
  std::string_view name() const override { return "random-knobs"; }
  TaskOutcome Run(client::Client& env, const EpisodeContext& c, std::ostream& log) override {
    const auto start = Clock::now();
    TaskOutcome out;
    out.task = c.task.summary.id;
    const auto domains = search::KnobDomains(c.task);
    protocol::Observation first;
    const std::string id = StartEpisode(env, c, c.budget + 3, first);
    out.starter_speedup = out.best_speedup = first.speedup;
    int64_t best_step = 0, current_step = 0;
    std::mt19937_64 rng(c.seed);
    for (int i = 0; i < c.budget && !domains.empty(); ++i) {
      std::map<std::string, protocol::KnobValue> setting;
      for (const auto& [name, values] : domains)
        setting[name] = values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng)];
      const protocol::Observation o =
          Paid(env.Step(id, protocol::KnobsAction{setting}, {{"policy", "random-knobs"}}), out);
      ++out.steps;
      current_step = o.step;
      if (o.status == "ok" && o.speedup > out.best_speedup) {
        out.best_speedup = o.speedup;
        best_step = current_step;
      }
    }
    if (domains.empty()) log << "random-knobs: " << out.task << " has no knob template: submitting the starter\n";
    SubmitBest(env, id, current_step, best_step, out, "random-knobs");
    out.seconds = SecondsSince(start);
    return out;
  }
};

// knob-search and mutate-search: a beam search (search.h) over an in-memory graph.
class SearchPolicy final : public EpisodePolicy {
 public:
  SearchPolicy(std::string name, std::string proposer) : name_(std::move(name)), proposer_(std::move(proposer)) {}
  std::string_view name() const override { return name_; }
  TaskOutcome Run(client::Client& env, const EpisodeContext& c, std::ostream& log) override {
    const auto start = Clock::now();
    TaskOutcome out;
    out.task = c.task.summary.id;
    search::ProposerContext context;
    context.task = c.task;
    context.backend = c.backend;
    std::string error;
    std::unique_ptr<search::Proposer> proposer = search::CreateProposer(proposer_, context, error);
    if (!proposer) {
      log << name_ << ": " << error << ": submitting the starter\n";
      return SubmitStarter(env, c, name_);
    }
    search::SearchGraph graph(out.task, c.backend, {{"proposer", proposer_}, {"algorithm", "beam"}});
    search::SearchOptions options;
    options.algorithm = "beam";
    options.max_evaluations = c.budget;
    options.seed = c.seed;
    options.record = c.record;
    options.beam_width = 2;
    options.branches = 4;
    options.depth = 1000;  // the evaluation budget is the limit
    std::ostringstream quiet;  // the search's per-node lines stay out of the evaluation's log
    {
      search::Searcher searcher(env, *proposer, graph, "", options, quiet);
      searcher.Run();
    }
    const search::SearchNode& root = graph.node(0);
    out.starter_speedup = root.ok() ? root.speedup : 0;
    const auto best = graph.Best();
    out.best_speedup = best ? graph.node(*best).speedup : 0;
    out.steps = graph.evaluations() + (graph.final_evaluation().empty() ? 0 : 1);
    const json& final = graph.final_evaluation();
    out.status = final.empty() ? "no correct kernel" : final.value("status", "");
    out.correct = out.status == "ok";
    out.speedup = out.correct ? final.value("speedup", 0.0) : 0;
    // The graph's speedups are the paid ones (search.cc: a pallas step off a TPU pays its estimate).
    out.speedup_kind = final.value("speedup_kind", "");
    if (out.speedup_kind.empty() && best) out.speedup_kind = graph.node(*best).speedup_kind;
    if (out.speedup <= 0) out.speedup_kind.clear();  // nothing was paid (a node's kind defaults to measured)
    out.seconds = SecondsSince(start);
    return out;
  }

 private:
  std::string name_, proposer_;
};

class AgentPolicy final : public EpisodePolicy {
 public:
  std::string_view name() const override { return "agent"; }
  TaskOutcome Run(client::Client& env, const EpisodeContext& c, std::ostream& log) override {
    TaskOutcome out;
    out.task = c.task.summary.id;
    agent::AgentOptions options;
    options.task = out.task;
    options.backend = c.backend;
    options.max_steps = std::max(3, c.budget);
    options.record = c.record;
    options.seed = c.seed;
    options.model = c.model;
    agent::Agent agent(env, *c.assistant, options, log);
    const llm::ChatTotals before = c.assistant->chat().totals();
    const agent::AgentReport report = agent.Run();
    out.correct = report.submitted && report.submit_status == "ok";
    out.status = report.submitted ? report.submit_status : report.stop_reason;
    if (!report.model_failure.empty()) {
      // The policy under evaluation is the model: an episode it never took part in is a failed
      // one, whatever the starter the agent submitted scored.
      out.correct = false;
      out.status = "error: the model endpoint failed: " + report.model_failure;
    }
    out.speedup = out.correct ? report.submit_speedup : 0;
    out.best_speedup = report.best_speedup;
    out.starter_speedup = report.starter_speedup;
    out.steps = report.steps;
    out.seconds = report.seconds;
    out.chat_calls = report.chat.calls - before.calls;
    out.prompt_tokens = report.chat.prompt_tokens - before.prompt_tokens;
    out.completion_tokens = report.chat.completion_tokens - before.completion_tokens;
    return out;
  }
};

}  // namespace

PolicyRegistry& PolicyRegistry::Global() {
  static PolicyRegistry registry;
  return registry;
}

void PolicyRegistry::Register(Entry entry) {
  for (Entry& e : entries_)
    if (e.name == entry.name) {
      e = std::move(entry);
      return;
    }
  entries_.push_back(std::move(entry));
}

const PolicyRegistry::Entry* PolicyRegistry::Find(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

std::string PolicyRegistry::NameList() const {
  std::string out;
  for (const Entry& e : entries_) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

std::unique_ptr<EpisodePolicy> PolicyRegistry::Create(std::string_view name, std::string& error) const {
  if (const Entry* e = Find(name)) return e->factory();
  error = "unknown policy '" + std::string(name) + "' (" + NameList() + ")";
  return nullptr;
}

bool PolicyRegistry::Ready(std::string_view name, const EpisodeContext& context, std::string& error) const {
  const Entry* e = Find(name);
  if (!e) {
    error = "unknown policy '" + std::string(name) + "' (" + NameList() + ")";
    return false;
  }
  if (e->needs.chat_model && !context.assistant) {
    error = "the " + e->name + " policy needs a model: --endpoint URL --model NAME";
    return false;
  }
  if (e->needs.policy_model && context.policy_model.empty()) {
    error = "the " + e->name + " policy needs a trained knob policy: --policy-model FILE (kernelgym train ppo|bc)";
    return false;
  }
  return true;
}

void RegisterBuiltinPolicies() {
  PolicyRegistry& r = PolicyRegistry::Global();
  r.Register({"starter", "submits the starter unchanged: the floor", {}, [] { return std::make_unique<StarterPolicy>(); }});
  r.Register({"random-knobs", "random settings of the task's knob template, then submits the best", {},
              [] { return std::make_unique<RandomKnobsPolicy>(); }});
  r.Register({"knob-search", "beam search over the knob template", {},
              [] { return std::make_unique<SearchPolicy>("knob-search", "knobs"); }});
  r.Register({"mutate-search", "beam search with source mutations (no model)", {},
              [] { return std::make_unique<SearchPolicy>("mutate-search", "mutate"); }});
  r.Register({"learned-knobs", "a trained knob policy acting greedily (--policy-model)", {.policy_model = true},
              [] { return MakeLearnedKnobsPolicy(); }});
  r.Register({"agent", "the LLM agent (--endpoint, --model)", {.chat_model = true},
              [] { return std::make_unique<AgentPolicy>(); }});
}

}  // namespace kernelgym::evaluate
