#include "policies/search/search.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <iomanip>
#include <set>
#include <sstream>

namespace kernelgym::search {
namespace {

// Off a TPU a pallas evaluation is timed by nothing: the step pays the estimated speedup (its info
// says `speedup_kind: estimated`), and the search ranks nodes by that instead of the unmeasured 0.
void TakeEstimateWherePaid(const nlohmann::json& info, SearchNode& node) {
  if (!node.ok() || info.value("speedup_kind", "") != "estimated") return;
  node.speedup_kind = "estimated";
  node.speedup = node.ci_low = node.ci_high = info.value("estimated_speedup", 0.0);
}


using nlohmann::json;

std::string Fixed(double x) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << x;
  return s.str();
}

// Two proposals of one batch that would evaluate the same kernel.
bool SameKernel(const Proposal& a, const Proposal& b) {
  if (!a.knobs.empty() || !b.knobs.empty()) return a.knobs == b.knobs;
  return !a.source.empty() && a.source == b.source;
}

// `node` beats `than`: correct, and faster (anything correct beats a failed kernel).
bool Beats(const SearchNode& node, const SearchNode& than) {
  return node.ok() && (!than.ok() || node.speedup > than.speedup);
}

}  // namespace

const std::vector<std::string>& AlgorithmNames() {
  static const std::vector<std::string> names = {"parallel", "beam", "ucb"};
  return names;
}

Searcher::Searcher(client::Client& env, Proposer& proposer, SearchGraph& graph, std::filesystem::path graph_file,
                   SearchOptions options, std::ostream& log)
    : env_(env),
      proposer_(proposer),
      graph_(graph),
      graph_file_(std::move(graph_file)),
      options_(std::move(options)),
      log_(log),
      // A resumed run continues with a different stream: the same seed would re-draw the
      // proposals the first run already evaluated (and the graph would refuse them).
      rng_(options_.seed + 1000003ULL * static_cast<uint64_t>(graph.size())) {}

Searcher::~Searcher() {
  std::set<std::string> closed;
  for (const auto& [node, env] : envs_)
    if (closed.insert(env).second) try {
        env_.Close(env);
      } catch (const std::exception&) {
        // The server may be gone; its sessions go with it.
      }
}

bool Searcher::BudgetLeft() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return graph_.evaluations() < options_.max_evaluations && elapsed < options_.time_budget_s;
}

void Searcher::Save() {
  if (graph_file_.empty()) return;
  std::string error;
  if (!graph_.Save(graph_file_, error)) log_ << "search: warning: " << error << std::endl;
}

void Searcher::EnsureRoot() {
  protocol::EnvMakeRequest make;
  make.task = graph_.task();
  make.backend = graph_.backend();
  make.max_steps = 10000;  // every node is one step of a fork: the budget is the search's own
  make.time_budget_s = 1e7;
  make.record = options_.record;
  root_env_ = env_.Make(make).env;
  const protocol::ResetResult reset = env_.Reset(root_env_, options_.seed);
  envs_[0] = root_env_;
  if (graph_.size() > 0) return;  // resumed: the root is known
  const protocol::Observation& o = reset.observation;
  SearchNode root;
  root.proposer = "root";
  root.strategy = "the starter";
  root.source = o.source;
  root.status = o.status;
  root.message = o.message;
  root.speedup = o.speedup;
  root.ci_low = o.speedup_ci_low;
  root.ci_high = o.speedup_ci_high;
  root.eval_seconds = reset.info.value("eval_seconds", 0.0);
  TakeEstimateWherePaid(reset.info, root);
  graph_.Add(root);
  log_ << "search: node 0 (the starter): " << o.status << (root.ok() ? " " + Fixed(root.speedup) + "x" : "")
       << std::endl;
  Save();
}

std::string Searcher::EnvOf(int id) {
  if (auto it = envs_.find(id); it != envs_.end()) return it->second;
  // Resumed: re-create the node's kernel in a fork of the root (one evaluation).
  const SearchNode& node = graph_.node(id);
  const std::string env = env_.Fork(root_env_).env;
  const protocol::Action action = node.knobs.empty() ? protocol::Action{protocol::ReplaceAction{node.source}}
                                                     : protocol::Action{protocol::KnobsAction{node.knobs}};
  env_.Step(env, action, {{"policy", "kernelgym-search"}, {"replay_of_node", id}});
  envs_[id] = env;
  return env;
}

void Searcher::KeepUnproductive(std::vector<roles::Exchange> exchanges) {
  roles::MarkProducedNoStep(exchanges);
  for (roles::Exchange& e : exchanges) unproductive_.push_back(std::move(e));
}

bool Searcher::ProposerUsable() {
  KeepUnproductive(proposer_.TakeUnproductiveExchanges());
  const std::string why = proposer_.unusable();
  if (why.empty()) return true;
  stop_reason_ = "the proposer's model cannot be asked any more: " + why;
  log_ << "search: stopping: " << stop_reason_ << std::endl;
  return false;
}

std::vector<std::vector<Proposal>> Searcher::ProposeFor(const std::vector<int>& nodes, int count) {
  // Each call gets its own stream, drawn in order from the search's: the same seed proposes the
  // same, however the calls interleave.
  std::vector<std::mt19937_64> streams;
  for (std::size_t i = 0; i < nodes.size(); ++i) streams.emplace_back(rng_());
  std::vector<std::vector<Proposal>> out(nodes.size());
  if (!proposer_.costly() || nodes.size() <= 1) {
    for (std::size_t i = 0; i < nodes.size(); ++i) out[i] = proposer_.Propose(graph_, graph_.node(nodes[i]), count, streams[i]);
    return out;
  }
  std::vector<std::future<std::vector<Proposal>>> asks;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    asks.push_back(std::async(std::launch::async, [this, &nodes, &streams, count, i] {
      return proposer_.Propose(graph_, graph_.node(nodes[i]), count, streams[i]);
    }));
  }
  for (std::size_t i = 0; i < asks.size(); ++i) out[i] = asks[i].get();
  return out;
}

std::vector<int> Searcher::Evaluate(const std::vector<Child>& children) {
  struct InFlight {
    std::size_t child;
    std::string env;
  };
  std::map<uint64_t, InFlight> in_flight;
  std::vector<int> ids(children.size(), -1);
  std::size_t next = 0;
  while (next < children.size() || !in_flight.empty()) {
    while (next < children.size() && static_cast<int>(in_flight.size()) < std::max(1, options_.concurrency)) {
      const Child& c = children[next];
      const std::string env = env_.Fork(EnvOf(c.parent)).env;
      json meta = {{"policy", "kernelgym-search"}, {"proposer", std::string(proposer_.name())},
                   {"strategy", c.proposal.strategy}, {"parent", c.parent}};
      // The model calls behind this child go with its own step; those that produced nothing ride
      // along, marked, so that they are recorded but never credited with this step's reward.
      roles::AppendExchanges(c.proposal.exchanges, meta);
      roles::AppendExchanges(unproductive_, meta);
      unproductive_.clear();
      in_flight[env_.Send(protocol::EnvStepRequest{env, c.proposal.action, meta})] = {next, env};
      ++next;
    }
    const std::optional<client::Reply> reply = env_.Recv(3600);
    if (!reply) throw client::TransportError("search: no reply to an evaluation within an hour");
    const auto it = in_flight.find(reply->id);
    if (it == in_flight.end()) continue;  // not ours (cannot happen: this client only sends these)
    const InFlight flight = it->second;
    in_flight.erase(it);
    const Child& c = children[flight.child];
    SearchNode node;
    node.parent = c.parent;
    node.proposer = std::string(proposer_.name());
    node.strategy = c.proposal.strategy;
    node.action = protocol::ActionToJson(c.proposal.action);
    node.knobs = c.proposal.knobs;
    try {
      const protocol::StepResult r = client::AsStepResult(*reply);
      const protocol::Observation& o = r.observation;
      node.source = o.source;
      node.status = o.status;
      node.message = o.action_error.empty() ? o.message : o.action_error;
      node.speedup = o.speedup;
      node.ci_low = o.speedup_ci_low;
      node.ci_high = o.speedup_ci_high;
      node.eval_seconds = r.info.value("eval_seconds", 0.0);
      TakeEstimateWherePaid(r.info, node);
    } catch (const client::ServerError& e) {
      node.source = c.proposal.source;
      node.status = "error";
      node.message = e.what();
    }
    const int id = graph_.Add(node);
    ids[flight.child] = id;
    if (graph_.node(id).ok()) {
      envs_[id] = flight.env;
    } else {
      try {
        env_.Close(flight.env);
      } catch (const client::ServerError&) {
      }
    }
    const auto best = graph_.Best();
    log_ << "search: node " << id << " (parent " << c.parent << ", " << node.proposer << ": " << node.strategy
         << "): " << node.status << (node.status == "ok" ? " " + Fixed(node.speedup) + "x" : "")
         << "; best " << (best ? Fixed(graph_.node(*best).speedup) + "x" : std::string("none")) << " ("
         << graph_.evaluations() << "/" << options_.max_evaluations << ")" << std::endl;
    Save();
  }
  return ids;
}

void Searcher::Parallel() {
  json& state = graph_.algorithm_state();
  if (!state.contains("heads")) state["heads"] = std::vector<int>(static_cast<std::size_t>(std::max(1, options_.runs)), 0);
  std::vector<int> heads = state["heads"].get<std::vector<int>>();
  // A free proposer offers a few moves to choose from (another chain may have taken one); a costly
  // one is asked for exactly the move each chain will evaluate.
  const int count = proposer_.costly() ? 1 : 4;
  while (BudgetLeft()) {
    std::vector<std::size_t> asking;  // the chains asked this round
    std::vector<int> nodes;
    const int room = options_.max_evaluations - graph_.evaluations();
    for (std::size_t r = 0; r < heads.size() && static_cast<int>(asking.size()) < room; ++r) {
      if (heads[r] < 0) continue;
      asking.push_back(r);
      nodes.push_back(heads[r]);
    }
    if (asking.empty()) break;
    std::vector<std::vector<Proposal>> proposed = ProposeFor(nodes, count);
    if (!ProposerUsable()) break;
    std::vector<Child> children;
    std::vector<std::size_t> chain_of;
    for (std::size_t i = 0; i < asking.size(); ++i) {
      const std::size_t r = asking[i];
      if (proposed[i].empty()) {
        log_ << "search: chain " << r << " has nothing left to try from node " << heads[r] << std::endl;
        heads[r] = -1;
        continue;
      }
      bool picked = false;
      for (Proposal& p : proposed[i]) {
        const bool taken = std::any_of(children.begin(), children.end(),
                                       [&](const Child& c) { return SameKernel(c.proposal, p); });
        if (!picked && !taken) {
          children.push_back({heads[r], std::move(p)});
          chain_of.push_back(r);
          picked = true;
        } else {
          KeepUnproductive(std::move(p.exchanges));  // not evaluated: another chain has this kernel
        }
      }
    }
    if (children.empty()) {
      if (std::all_of(heads.begin(), heads.end(), [](int h) { return h < 0; })) break;
      continue;  // every proposal repeated another chain's: ask again
    }
    const std::vector<int> ids = Evaluate(children);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::size_t r = chain_of[i];
      if (Beats(graph_.node(ids[i]), graph_.node(heads[r]))) heads[r] = ids[i];
    }
    state["heads"] = heads;
    Save();
  }
}

void Searcher::Beam() {
  json& state = graph_.algorithm_state();
  if (!state.contains("level")) state["level"] = std::vector<int>{0};
  if (!state.contains("depth")) state["depth"] = 0;
  std::vector<int> level = state["level"].get<std::vector<int>>();
  int depth = state["depth"].get<int>();
  while (depth < options_.depth && BudgetLeft() && !level.empty()) {
    std::vector<Child> children;
    const int room = options_.max_evaluations - graph_.evaluations();
    // Only as many parents and branches as the evaluation budget can take: a costly proposer's
    // extra proposals would be paid for and thrown away.
    std::vector<int> parents;
    for (int parent : level)
      if (static_cast<int>(parents.size()) * options_.branches < room) parents.push_back(parent);
    const int branches = std::min(options_.branches, std::max(1, room));
    std::vector<std::vector<Proposal>> proposed = ProposeFor(parents, branches);
    if (!ProposerUsable()) break;
    for (std::size_t i = 0; i < parents.size(); ++i)
      for (Proposal& p : proposed[i]) {
        const bool fits = static_cast<int>(children.size()) < room;
        if (fits && std::none_of(children.begin(), children.end(), [&](const Child& c) { return SameKernel(c.proposal, p); }))
          children.push_back({parents[i], std::move(p)});
        else
          KeepUnproductive(std::move(p.exchanges));
      }
    if (children.empty()) {
      log_ << "search: the beam has nothing left to try" << std::endl;
      break;
    }
    std::vector<int> better;
    for (int id : Evaluate(children))
      if (Beats(graph_.node(id), graph_.node(graph_.node(id).parent))) better.push_back(id);
    std::sort(better.begin(), better.end(),
              [&](int a, int b) { return graph_.node(a).speedup > graph_.node(b).speedup; });
    if (better.size() > static_cast<std::size_t>(options_.beam_width))
      better.resize(static_cast<std::size_t>(options_.beam_width));
    ++depth;
    if (better.empty()) {
      log_ << "search: level " << depth << ": no child beat its parent; the beam stays" << std::endl;
    } else {
      level = better;
    }
    for (std::size_t i = 0; i < graph_.size(); ++i) {
      SearchNode& n = graph_.node(static_cast<int>(i));
      n.kept = std::find(level.begin(), level.end(), n.id) != level.end();
    }
    state["level"] = level;
    state["depth"] = depth;
    Save();
  }
}

void Searcher::Ucb() {
  json& state = graph_.algorithm_state();
  if (!state.contains("exhausted")) state["exhausted"] = json::array();
  std::set<int> exhausted = state["exhausted"].get<std::set<int>>();
  while (BudgetLeft()) {
    const std::optional<int> best = graph_.Best();
    if (!best) break;
    const double top = std::max(graph_.node(*best).speedup, 1e-9);
    int total = 1;
    for (const SearchNode& n : graph_.nodes()) total += n.visits;
    int pick = -1;
    double pick_score = -1;
    for (const SearchNode& n : graph_.nodes()) {
      if (!n.ok() || exhausted.count(n.id)) continue;
      const double score = n.speedup / top + options_.ucb_c * std::sqrt(std::log(total) / (1.0 + n.visits));
      if (score > pick_score) {
        pick = n.id;
        pick_score = score;
      }
    }
    if (pick < 0) break;
    const int room = options_.max_evaluations - graph_.evaluations();
    std::vector<Proposal> proposals =
        std::move(ProposeFor({pick}, std::min(std::max(1, options_.concurrency), room))[0]);
    if (!ProposerUsable()) break;
    ++graph_.node(pick).visits;
    if (proposals.empty()) {
      exhausted.insert(pick);
      state["exhausted"] = exhausted;
      continue;
    }
    std::vector<Child> children;
    for (Proposal& p : proposals) children.push_back({pick, std::move(p)});
    Evaluate(children);
    state["exhausted"] = exhausted;
    Save();
  }
}

// The final, stricter evaluation (more trials, a longer timing budget) of the best node. A kernel
// can pass a step's checks and fail these — e.g. a reassociated sum one ulp outside the tolerance
// on inputs the step never drew — so the next best is submitted in turn, up to kFinalTries.
void Searcher::SubmitBest() {
  constexpr std::size_t kFinalTries = 3;
  std::vector<int> candidates;
  for (const SearchNode& n : graph_.nodes())
    if (n.ok()) candidates.push_back(n.id);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int a, int b) { return graph_.node(a).speedup > graph_.node(b).speedup; });
  if (candidates.size() > kFinalTries) candidates.resize(kFinalTries);
  json attempts = json::array();
  for (int id : candidates) {
    json meta = {{"policy", "kernelgym-search"}, {"submit_of_node", id}};
    roles::AppendExchanges(unproductive_, meta);  // the last exchanges that produced nothing, marked
    unproductive_.clear();
    const protocol::StepResult r = env_.Step(EnvOf(id), protocol::SubmitAction{}, meta);
    envs_.erase(id);  // the submit ended that env's episode
    const protocol::Observation& o = r.observation;
    // The final evaluation's speedup is the one it was paid for, as the nodes' are: off a TPU a
    // pallas kernel's trusted estimate (labelled `speedup_kind: estimated`), else the measurement.
    SearchNode paid;
    paid.status = o.status;
    paid.speedup = o.speedup;
    paid.ci_low = o.speedup_ci_low;
    paid.ci_high = o.speedup_ci_high;
    TakeEstimateWherePaid(r.info, paid);
    attempts.push_back({{"node", id}, {"status", o.status}, {"speedup", paid.speedup}, {"message", o.message}});
    graph_.final_evaluation() = {{"node", id},          {"status", o.status},          {"speedup", paid.speedup},
                                 {"ci_low", paid.ci_low}, {"ci_high", paid.ci_high}, {"message", o.message},
                                 {"speedup_kind", paid.speedup_kind}, {"attempts", attempts}};
    log_ << "search: final evaluation of node " << id << ": " << o.status << " " << Fixed(paid.speedup) << "x"
         << (paid.speedup_kind == "estimated" ? " (estimated)" : "") << (o.status == "ok" ? "" : " (" + o.message + ")")
         << std::endl;
    Save();
    if (o.status == "ok") break;
  }
}

void Searcher::Run() {
  started_ = std::chrono::steady_clock::now();
  // A finished search given no more budget has nothing to ask the server (a report re-render).
  if (graph_.size() > 0 && !BudgetLeft() && (!options_.submit_best || !graph_.final_evaluation().empty())) return;
  EnsureRoot();
  const int before = graph_.evaluations();
  if (options_.algorithm == "parallel") Parallel();
  else if (options_.algorithm == "ucb") Ucb();
  else Beam();
  // A resumed run that found more redoes the final evaluation: the best may have changed.
  if (options_.submit_best && (graph_.final_evaluation().empty() || graph_.evaluations() != before)) SubmitBest();
}

}  // namespace kernelgym::search
