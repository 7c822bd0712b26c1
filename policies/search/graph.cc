#include "policies/search/graph.h"

#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

namespace kernelgym::search {
namespace {

using nlohmann::json;

std::string Fixed(double x, int digits = 2) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

// Mermaid labels: no quotes, brackets or newlines.
std::string MermaidText(std::string s) {
  for (std::size_t at = s.find("->"); at != std::string::npos; at = s.find("->", at)) s.replace(at, 2, "\u2192");
  for (char& c : s)
    if (c == '"' || c == '[' || c == ']' || c == '\n' || c == '|' || c == '{' || c == '}' || c == '<' || c == '>')
      c = ' ';
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// A check that names the field: throws std::invalid_argument, caught by FromJson.
template <typename T>
T Get(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw std::invalid_argument(where + "." + key + ": missing");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(where + "." + key + ": wrong type");
  }
}

}  // namespace

SearchGraph::SearchGraph(std::string task, std::string backend, json settings)
    : task_(std::move(task)), backend_(std::move(backend)), settings_(std::move(settings)) {}

int SearchGraph::Add(SearchNode node) {
  node.id = static_cast<int>(nodes_.size());
  node.depth = node.parent < 0 ? 0 : nodes_.at(static_cast<std::size_t>(node.parent)).depth + 1;
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

std::optional<int> SearchGraph::Best() const {
  std::optional<int> best;
  for (const SearchNode& n : nodes_)
    if (n.ok() && (!best || n.speedup > node(*best).speedup)) best = n.id;
  return best;
}

std::vector<int> SearchGraph::PathTo(int id) const {
  std::vector<int> path;
  for (int at = id; at >= 0; at = node(at).parent) path.insert(path.begin(), at);
  return path;
}

std::vector<int> SearchGraph::Children(int id) const {
  std::vector<int> out;
  for (const SearchNode& n : nodes_)
    if (n.parent == id) out.push_back(n.id);
  return out;
}

bool SearchGraph::HasSource(const std::string& source) const { return NodeWithSource(source).has_value(); }

std::optional<int> SearchGraph::NodeWithSource(const std::string& source) const {
  for (const SearchNode& n : nodes_)
    if (n.source == source) return n.id;
  return std::nullopt;
}

int SearchGraph::evaluations() const { return nodes_.empty() ? 0 : static_cast<int>(nodes_.size()) - 1; }

json SearchGraph::ToJson() const {
  json nodes = json::array();
  for (const SearchNode& n : nodes_) {
    json knobs = json::object();
    for (const auto& [k, v] : n.knobs) knobs[k] = protocol::KnobValueToJson(v);
    nodes.push_back({{"id", n.id},           {"parent", n.parent},   {"depth", n.depth},
                     {"proposer", n.proposer}, {"strategy", n.strategy}, {"action", n.action},
                     {"knobs", knobs},         {"source", n.source},     {"status", n.status},
                     {"message", n.message},   {"speedup", n.speedup},   {"ci_low", n.ci_low},
                     {"ci_high", n.ci_high},   {"eval_seconds", n.eval_seconds}, {"visits", n.visits},
                     {"kept", n.kept},         {"speedup_kind", n.speedup_kind}});
  }
  return {{"format", "kernelgym-search-graph"}, {"version", 1},          {"task", task_},
          {"backend", backend_},                {"settings", settings_}, {"algorithm_state", algorithm_state_},
          {"final_evaluation", final_},         {"nodes", nodes}};
}

std::optional<SearchGraph> SearchGraph::FromJson(const json& j, std::string& error) {
  try {
    if (!j.is_object() || j.value("format", "") != "kernelgym-search-graph")
      throw std::invalid_argument("not a kernelgym search graph (format != kernelgym-search-graph)");
    SearchGraph g(Get<std::string>(j, "task", "graph"), Get<std::string>(j, "backend", "graph"),
                  j.value("settings", json::object()));
    g.algorithm_state_ = j.value("algorithm_state", json::object());
    g.final_ = j.value("final_evaluation", json::object());
    const json& nodes = j.at("nodes");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const json& n = nodes[i];
      const std::string where = "nodes[" + std::to_string(i) + "]";
      SearchNode node;
      node.id = Get<int>(n, "id", where);
      if (node.id != static_cast<int>(i)) throw std::invalid_argument(where + ".id: must be " + std::to_string(i));
      node.parent = Get<int>(n, "parent", where);
      if (node.parent >= node.id || (node.id > 0 && node.parent < 0))
        throw std::invalid_argument(where + ".parent: must name an earlier node");
      node.depth = Get<int>(n, "depth", where);
      node.proposer = Get<std::string>(n, "proposer", where);
      node.strategy = Get<std::string>(n, "strategy", where);
      node.action = n.value("action", json());
      const json knobs = n.value("knobs", json::object());  // a named copy: items() of a temporary would dangle
      for (const auto& [k, v] : knobs.items()) {
        const auto value = protocol::KnobValueFromJson(v);
        if (!value) throw std::invalid_argument(where + ".knobs." + k + ": not a number or string");
        node.knobs[k] = *value;
      }
      node.source = Get<std::string>(n, "source", where);
      node.status = Get<std::string>(n, "status", where);
      node.message = n.value("message", "");
      node.speedup = Get<double>(n, "speedup", where);
      node.ci_low = n.value("ci_low", 0.0);
      node.ci_high = n.value("ci_high", 0.0);
      node.eval_seconds = n.value("eval_seconds", 0.0);
      node.visits = n.value("visits", 0);
      node.kept = n.value("kept", true);
      node.speedup_kind = n.value("speedup_kind", "measured");
      g.nodes_.push_back(std::move(node));
    }
    return g;
  } catch (const std::exception& e) {
    error = e.what();
    return std::nullopt;
  }
}

bool SearchGraph::Save(const std::filesystem::path& file, std::string& error) const {
  const std::filesystem::path temporary = file.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << ToJson().dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    out.flush();
    if (!out) {
      error = "cannot write " + temporary.string();
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, file, ec);
  if (ec) {
    error = "cannot rename " + temporary.string() + " to " + file.string() + ": " + ec.message();
    return false;
  }
  return true;
}

std::optional<SearchGraph> SearchGraph::Load(const std::filesystem::path& file, std::string& error) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    error = "cannot read " + file.string();
    return std::nullopt;
  }
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = file.string() + ": not JSON";
    return std::nullopt;
  }
  std::optional<SearchGraph> g = FromJson(j, error);
  if (!g) error = file.string() + ": " + error;
  return g;
}

std::string RenderSearchReport(const SearchGraph& g) {
  std::ostringstream out;
  out << "# Search on " << g.task() << " (" << g.backend() << ")\n\n";
  if (g.size() == 0) return out.str() + "No nodes.\n";
  const SearchNode& root = g.node(0);
  const std::optional<int> best = g.Best();
  std::map<std::string, int> statuses;
  for (const SearchNode& n : g.nodes()) ++statuses[n.status];
  out << "- settings: `" << g.settings().dump() << "`\n";
  out << "- evaluations: " << g.evaluations() << " (";
  bool first = true;
  for (const auto& [status, count] : statuses) {
    out << (first ? "" : ", ") << status << " " << count;
    first = false;
  }
  out << ")\n";
  out << "- starter: " << (root.ok() ? Fixed(root.speedup) + "x" : root.status) << "\n";
  if (best) {
    const SearchNode& b = g.node(*best);
    out << "- best: node " << b.id << ", " << Fixed(b.speedup) << "x the reference";
    if (root.ok() && root.speedup > 0) out << " = " << Fixed(b.speedup / root.speedup) << "x the starter";
    out << "\n";
  }
  if (!g.final_evaluation().empty()) {
    const nlohmann::json& f = g.final_evaluation();
    out << "- final evaluation (submit) of node " << f.value("node", -1) << ": " << f.value("status", "") << " "
        << Fixed(f.value("speedup", 0.0)) << "x\n";
    for (const nlohmann::json& a : f.value("attempts", nlohmann::json::array()))
      if (a.value("status", "") != "ok")
        out << "  - node " << a.value("node", -1) << " failed it first: " << a.value("status", "") << ": "
            << a.value("message", "") << "\n";
  }

  if (best) {
    out << "\n## Best path\n\n| node | edit | status | speedup |\n|---|---|---|---|\n";
    for (int id : g.PathTo(*best)) {
      const SearchNode& n = g.node(id);
      out << "| " << n.id << " | " << (n.parent < 0 ? "the starter" : n.proposer + ": " + n.strategy) << " | "
          << n.status << " | " << (n.ok() ? Fixed(n.speedup) + "x" : "-") << " |\n";
    }
  }

  out << "\n## Graph\n\n```mermaid\nflowchart TD\n";
  const std::vector<int> path = best ? g.PathTo(*best) : std::vector<int>();
  for (const SearchNode& n : g.nodes()) {
    out << "  n" << n.id << "[\"" << n.id << ": " << (n.ok() ? Fixed(n.speedup) + "x" : n.status) << "\"]\n";
    if (n.parent >= 0) out << "  n" << n.parent << " -->|" << MermaidText(n.strategy) << "| n" << n.id << "\n";
  }
  for (int id : path) out << "  style n" << id << " stroke-width:3px\n";
  out << "```\n\n## Nodes\n\n| node | parent | depth | proposer | edit | status | speedup | seconds |\n"
         "|---|---|---|---|---|---|---|---|\n";
  for (const SearchNode& n : g.nodes())
    out << "| " << n.id << " | " << (n.parent < 0 ? "-" : std::to_string(n.parent)) << " | " << n.depth << " | "
        << n.proposer << " | " << n.strategy << " | " << n.status << " | " << (n.ok() ? Fixed(n.speedup) + "x" : "-")
        << " | " << Fixed(n.eval_seconds) << " |\n";
  return out.str();
}

}  // namespace kernelgym::search
