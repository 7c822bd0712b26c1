// `kernelgym search`: a search over kernel versions through the environment (MaxKernel's third
// paradigm). Three algorithms over one graph (graph.h) and any proposer (proposer.h):
//
//   parallel  `runs` independent hill-climbing chains: each proposes one child of its head per
//             round; a child that is correct and faster becomes the head
//   beam      levels of at most `beam_width` kept nodes; each is expanded with `branches`
//             children; children that are correct and beat their parent compete for the next
//             level's places, up to `depth` levels
//   ucb       best-first: expand the correct node with the highest upper-confidence score,
//             speedup / best + c * sqrt(ln(total expansions) / (1 + its expansions))
//
// Children are evaluated concurrently (up to `concurrency` steps in flight through the client's
// async API): each is an env fork of its parent's env plus the proposal's action. The graph is
// saved after every evaluation; a run given a saved graph continues from it (a node's env does not
// survive the process, so a resumed node is re-created by forking the root env and replaying its
// kernel: one evaluation). At the end the best node gets the final, stricter evaluation (submit);
// if it fails there, the next best does (up to three).
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <random>
#include <string>

#include "env/client/client.h"
#include "policies/search/graph.h"
#include "policies/search/proposer.h"

namespace kernelgym::search {

struct SearchOptions {
  std::string algorithm = "beam";  // parallel | beam | ucb
  int max_evaluations = 24;        // children evaluated, over all resumed runs
  double time_budget_s = 3600;     // this run's wall clock
  int concurrency = 2;             // evaluations in flight
  int runs = 4;                    // parallel: chains
  int beam_width = 2, branches = 4, depth = 4;  // beam
  double ucb_c = 0.5;              // ucb: exploration weight
  uint64_t seed = 1;
  bool record = false;             // the envs record to the server's trajectory store
  bool submit_best = true;         // the final evaluation of the best node
};

const std::vector<std::string>& AlgorithmNames();  // "parallel", "beam", "ucb"

class Searcher {
 public:
  // `graph` is new (empty: the root is evaluated first) or loaded from `graph_file` (resume).
  // `graph_file` empty: not saved.
  Searcher(client::Client& env, Proposer& proposer, SearchGraph& graph, std::filesystem::path graph_file,
           SearchOptions options, std::ostream& log);
  ~Searcher();  // closes the envs it made

  // Runs until the evaluation or time budget is spent or the algorithm has nothing left to try.
  // Throws what the client throws for transport failures; an evaluation the server refuses becomes
  // a node with status "error" and the message.
  void Run();
  // Why the search ended before its budgets did ("" when it did not): the proposer's model became
  // unusable (a refusal no retry fixes, a spent token or cost budget).
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  struct Child {
    int parent;
    Proposal proposal;
  };
  void EnsureRoot();
  std::string EnvOf(int node);                        // a live env holding the node's kernel
  std::vector<int> Evaluate(const std::vector<Child>& children);  // the new nodes' ids, in `children` order
  // Proposals for several nodes at once (concurrently: a costly proposer asks a model for each).
  std::vector<std::vector<Proposal>> ProposeFor(const std::vector<int>& nodes, int count);
  // Keeps exchanges that produced no step, to go (marked) with the next step sent.
  void KeepUnproductive(std::vector<roles::Exchange> exchanges);
  bool ProposerUsable();
  bool BudgetLeft() const;
  void Save();
  void Parallel();
  void Beam();
  void Ucb();
  void SubmitBest();

  client::Client& env_;
  Proposer& proposer_;
  SearchGraph& graph_;
  std::filesystem::path graph_file_;
  SearchOptions options_;
  std::ostream& log_;
  std::mt19937_64 rng_;
  std::string root_env_;
  std::map<int, std::string> envs_;  // node -> its live env
  std::vector<roles::Exchange> unproductive_;  // chat exchanges that led to no step, not yet recorded
  std::string stop_reason_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace kernelgym::search
