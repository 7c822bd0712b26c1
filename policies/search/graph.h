// The search graph of `kernelgym search`: nodes are kernel versions with their evaluation, edges
// the edit (and the strategy behind it) that made a child from its parent. It is the search's
// whole state: saved as JSON after every change (written to a temporary name and renamed, so a
// kill never leaves a torn file), and a run resumes from it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "env/protocol/messages.h"

namespace kernelgym::search {

struct SearchNode {
  int id = 0;
  int parent = -1;            // -1: the root, the task's starter
  int depth = 0;
  std::string proposer;       // "root", "knobs", "mutate", "llm"
  std::string strategy;       // the edge in words: "SIMD 0 -> 1", "omp simd on the loop at line 12", a strategy
  nlohmann::json action;      // the edit as sent, in the trajectory record's action form
  std::map<std::string, protocol::KnobValue> knobs;  // the template setting, when made from the task's knobs
  std::string source;         // the kernel
  std::string status;         // the evaluation's status ("ok", "compile_error", ...)
  std::string message;
  double speedup = 0;         // 0 unless status is ok
  double ci_low = 0, ci_high = 0;
  // "measured", or "estimated" where the step paid the estimate (a pallas task off a TPU): then
  // `speedup` is the estimated one (the reference's estimated time over the kernel's).
  std::string speedup_kind = "measured";
  double eval_seconds = 0;
  int visits = 0;             // times picked for expansion
  bool kept = true;           // beam search: still in the beam (or a chain's head)
  bool ok() const { return status == "ok"; }
};

class SearchGraph {
 public:
  SearchGraph() = default;
  SearchGraph(std::string task, std::string backend, nlohmann::json settings);

  int Add(SearchNode node);  // assigns the id; returns it
  SearchNode& node(int id) { return nodes_.at(static_cast<std::size_t>(id)); }
  const SearchNode& node(int id) const { return nodes_.at(static_cast<std::size_t>(id)); }
  const std::vector<SearchNode>& nodes() const { return nodes_; }
  std::size_t size() const { return nodes_.size(); }

  // The correct node with the highest speedup (the root on ties); nullopt when none is correct.
  std::optional<int> Best() const;
  // Root .. id.
  std::vector<int> PathTo(int id) const;
  std::vector<int> Children(int id) const;
  // Whether a kernel with this source was already evaluated (the search never pays twice).
  bool HasSource(const std::string& source) const;
  // The first node with this source, if any.
  std::optional<int> NodeWithSource(const std::string& source) const;

  const std::string& task() const { return task_; }
  const std::string& backend() const { return backend_; }
  const nlohmann::json& settings() const { return settings_; }  // algorithm, proposer, seed, budgets
  // The algorithm's own state beyond the nodes (chain heads, beam level, ...), saved with them.
  nlohmann::json& algorithm_state() { return algorithm_state_; }
  const nlohmann::json& algorithm_state() const { return algorithm_state_; }
  // The final, stricter evaluation of the best node (submit), once done.
  nlohmann::json& final_evaluation() { return final_; }
  const nlohmann::json& final_evaluation() const { return final_; }
  int evaluations() const;  // nodes other than the root

  nlohmann::json ToJson() const;
  static std::optional<SearchGraph> FromJson(const nlohmann::json& json, std::string& error);
  // Atomic: a temporary file in the same folder, then rename.
  bool Save(const std::filesystem::path& file, std::string& error) const;
  static std::optional<SearchGraph> Load(const std::filesystem::path& file, std::string& error);

 private:
  std::string task_, backend_;
  nlohmann::json settings_ = nlohmann::json::object();
  nlohmann::json algorithm_state_ = nlohmann::json::object();
  nlohmann::json final_ = nlohmann::json::object();
  std::vector<SearchNode> nodes_;
};

// Markdown: the summary (best speedup over the starter, evaluations, statuses), the best path
// with each edge's strategy and speedup, a Mermaid flowchart of the graph (GitHub renders it),
// and a table of every node.
std::string RenderSearchReport(const SearchGraph& graph);

}  // namespace kernelgym::search
