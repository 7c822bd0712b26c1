// The search's pure parts: the graph (JSON round trip, best node and path, report) and the knob
// proposer's moves. The search against a real server is in tests/integration/search_test.cc.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "policies/search/graph.h"
#include "policies/search/proposer.h"

namespace kernelgym::search {
namespace {

SearchNode Node(int parent, const std::string& status, double speedup, const std::string& source) {
  SearchNode n;
  n.parent = parent;
  n.proposer = parent < 0 ? "root" : "knobs";
  n.strategy = parent < 0 ? "the starter" : "SIMD 0 -> 1";
  n.status = status;
  n.speedup = speedup;
  n.source = source;
  return n;
}

SearchGraph SmallGraph() {
  SearchGraph g("cpu/softmax_rows", "cpu", {{"proposer", "knobs"}, {"algorithm", "beam"}});
  g.Add(Node(-1, "ok", 0.25, "s0"));
  g.Add(Node(0, "ok", 1.0, "s1"));
  g.Add(Node(0, "compile_error", 0, "s2"));
  SearchNode knob = Node(1, "ok", 2.1, "s3");
  knob.knobs = {{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}};
  g.Add(knob);
  g.algorithm_state() = {{"level", {3}}, {"depth", 2}};
  g.final_evaluation() = {{"node", 3}, {"status", "ok"}, {"speedup", 2.05}};
  return g;
}

TEST(SearchGraph, BestNodePathAndDepth) {
  const SearchGraph g = SmallGraph();
  ASSERT_TRUE(g.Best());
  EXPECT_EQ(*g.Best(), 3);
  EXPECT_EQ(g.PathTo(3), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(g.node(3).depth, 2);
  EXPECT_EQ(g.Children(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(g.evaluations(), 3);
  EXPECT_TRUE(g.HasSource("s2"));
  EXPECT_FALSE(g.HasSource("s9"));
  SearchGraph failed("t", "cpu", {});
  failed.Add(Node(-1, "incorrect", 0, "x"));
  EXPECT_FALSE(failed.Best());
}

TEST(SearchGraph, JsonRoundTripIsExact) {
  const SearchGraph g = SmallGraph();
  std::string error;
  const std::optional<SearchGraph> back = SearchGraph::FromJson(g.ToJson(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->ToJson(), g.ToJson());
  EXPECT_EQ(std::get<std::string>(back->node(3).knobs.at("EXP")), "exp_poly");
  EXPECT_EQ(back->algorithm_state()["depth"], 2);
}

TEST(SearchGraph, MalformedGraphsAreErrorsThatNameTheField) {
  std::string error;
  nlohmann::json j = SmallGraph().ToJson();
  j["nodes"][2]["parent"] = 5;
  EXPECT_FALSE(SearchGraph::FromJson(j, error));
  EXPECT_EQ(error, "nodes[2].parent: must name an earlier node");
  j = SmallGraph().ToJson();
  j["nodes"][1].erase("source");
  EXPECT_FALSE(SearchGraph::FromJson(j, error));
  EXPECT_EQ(error, "nodes[1].source: missing");
  EXPECT_FALSE(SearchGraph::FromJson({{"format", "something else"}}, error));
}

TEST(SearchGraph, SaveIsAtomicAndLoadsBack) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / ("graph-" + std::to_string(getpid()) + ".json");
  std::string error;
  ASSERT_TRUE(SmallGraph().Save(file, error)) << error;
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
  const auto loaded = SearchGraph::Load(file, error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->size(), 4u);
  std::filesystem::remove(file);
  EXPECT_FALSE(SearchGraph::Load(file, error));
}

TEST(SearchGraph, TheReportShowsTheBestPathAndTheGraph) {
  const std::string report = RenderSearchReport(SmallGraph());
  EXPECT_NE(report.find("best: node 3, 2.10x the reference = 8.40x the starter"), std::string::npos) << report;
  EXPECT_NE(report.find("final evaluation (submit) of node 3: ok 2.05x"), std::string::npos);
  EXPECT_NE(report.find("## Best path"), std::string::npos);
  EXPECT_NE(report.find("```mermaid"), std::string::npos);
  EXPECT_NE(report.find("n1 -->|SIMD 0 \u2192 1| n3"), std::string::npos) << "a Mermaid edge label without '->'";
  EXPECT_NE(report.find("compile_error 1"), std::string::npos);
}

protocol::TaskInfo TaskWithKnobs() {
  protocol::TaskInfo task;
  task.summary.id = "cpu/softmax_rows";
  task.knobs["SIMD"] = {{int64_t{0}, int64_t{1}}, int64_t{0}};
  task.knobs["EXP"] = {{std::string("std::exp"), std::string("exp_poly")}, std::string("std::exp")};
  return task;
}

TEST(KnobsProposer, MovesOneKnobAndNeverRepeatsASetting) {
  std::string error;
  ProposerContext context;
  context.task = TaskWithKnobs();
  std::unique_ptr<Proposer> knobs = CreateProposer("knobs", context, error);
  ASSERT_TRUE(knobs) << error;
  SearchGraph g("cpu/softmax_rows", "cpu", {});
  g.Add(Node(-1, "ok", 0.25, "starter"));
  std::mt19937_64 rng(1);
  // From the starter: the defaults and their two one-knob changes.
  std::vector<Proposal> first = knobs->Propose(g, g.node(0), 10, rng);
  ASSERT_EQ(first.size(), 3u);
  std::set<std::string> strategies;
  for (const Proposal& p : first) strategies.insert(p.strategy);
  EXPECT_EQ(strategies, (std::set<std::string>{"the template's defaults", "SIMD 0 -> 1", "EXP std::exp -> exp_poly"}));
  // Once those are in the graph, a node at SIMD=1 has one move left (EXP), the other being taken.
  for (const Proposal& p : first) {
    SearchNode n = Node(0, "ok", 1, "source of " + p.strategy);
    n.strategy = p.strategy;
    n.knobs = p.knobs;
    g.Add(n);
  }
  int simd = -1;
  for (const SearchNode& n : g.nodes())
    if (n.strategy == "SIMD 0 -> 1") simd = n.id;
  const std::vector<Proposal> next = knobs->Propose(g, g.node(simd), 10, rng);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].strategy, "EXP std::exp -> exp_poly");
  EXPECT_EQ(std::get<int64_t>(next[0].knobs.at("SIMD")), 1);
}

TEST(Proposers, UnknownOrUnusableProposersAreClearErrors) {
  std::string error;
  ProposerContext context;
  context.task = {{"id", "cpu/no_knobs"}};
  EXPECT_FALSE(CreateProposer("knobs", context, error));
  EXPECT_NE(error.find("has no knob template"), std::string::npos) << error;
  EXPECT_FALSE(CreateProposer("llm", context, error));
  EXPECT_NE(error.find("--endpoint"), std::string::npos) << error;
  context.backend = "pallas";
  EXPECT_FALSE(CreateProposer("mutate", context, error));
  EXPECT_FALSE(CreateProposer("genetic", context, error));
  EXPECT_NE(error.find("unknown proposer 'genetic'"), std::string::npos);
}

}  // namespace
}  // namespace kernelgym::search
