// `kernelgym search`, `evaluate` and `collect` end to end: the real commands against a real
// server and runner; kernels compiled, checked and timed for real. Outcomes are asserted, not
// timings: a search must find a kernel much faster than the starter (the margins below are far
// from the measured figures in docs/search.md), a resumed search must continue its saved graph,
// and a report's numbers must be the recorded episodes' numbers.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>

#include "core/subprocess.h"
#include "datasets/trajectory/reader.h"
#include "policies/llm/scripted_server.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

nlohmann::json ReadJson(const std::filesystem::path& file) { return nlohmann::json::parse(ReadText(file)); }

double StarterSpeedup(const nlohmann::json& graph) { return graph["nodes"][0]["speedup"].get<double>(); }

double BestSpeedup(const nlohmann::json& graph) {
  double best = 0;
  for (const nlohmann::json& n : graph["nodes"])
    if (n["status"] == "ok") best = std::max(best, n["speedup"].get<double>());
  return best;
}

// The knob proposer: a beam search of 8 evaluations finds a kernel at least 1.5x faster than the
// starter (measured: 6.8-8.9x on softmax_rows; every templated task: bench/search_knobs.py).
TEST(SearchTest, TheKnobProposerFindsAMuchFasterKernel) {
  ServerProcess server({"--local-runners", "1"});
  for (const std::string task : {"cpu/softmax_rows"}) {
    const std::filesystem::path graph_file = server.dir() / (task.substr(4) + ".json");
    const std::filesystem::path report = server.dir() / (task.substr(4) + ".md");
    const ProcessResult run = RunCli({"search", "--task", task, "--proposer", "knobs", "--algorithm", "beam",
                                   "--max-evaluations", "8", "--connect", server.clients(), "--graph",
                                   graph_file.string(), "--report", report.string()});
    ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
    const nlohmann::json graph = ReadJson(graph_file);
    EXPECT_LE(graph["nodes"].size(), 9u);
    EXPECT_GT(BestSpeedup(graph), 1.5 * StarterSpeedup(graph)) << task << "\n" << ReadText(report);
    EXPECT_EQ(graph["final_evaluation"]["status"], "ok") << task;
    EXPECT_NE(ReadText(report).find("## Best path"), std::string::npos);
  }
}

// The mutation proposer needs no model and no template: SIMD reductions and the polynomial exp
// turn softmax_rows' scalar starter into a much faster kernel. Measured with seed 3: the
// polynomial exp alone is 1.5-1.6x (too close to the bar: CI once saw 1.48x); a second level that
// adds the max reduction to it is 2.9x, reached at the 10th evaluation of 12.
TEST(SearchTest, TheMutationProposerFindsAFasterKernel) {
  ServerProcess server({"--local-runners", "1"});
  const std::filesystem::path graph_file = server.dir() / "mutate.json";
  const ProcessResult run =
      RunCli({"search", "--task", "cpu/softmax_rows", "--proposer", "mutate", "--algorithm", "beam", "--branches", "6",
           "--max-evaluations", "12", "--seed", "3", "--connect", server.clients(), "--graph", graph_file.string()});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  const nlohmann::json graph = ReadJson(graph_file);
  EXPECT_GT(BestSpeedup(graph), 1.5 * StarterSpeedup(graph)) << run.stderr_text;
  std::set<std::string> sources;
  for (const nlohmann::json& n : graph["nodes"]) {
    EXPECT_TRUE(sources.insert(n["source"].get<std::string>()).second) << "node " << n["id"] << " evaluated twice";
  }
}

// The llm proposer: the implementer role, asked to apply a strategy from the list, through a
// chat endpoint (the scripted one, which always answers with the same AVX2 kernel). Its kernel is
// evaluated once; the identical later replies are not evaluated again; every exchange is recorded.
TEST(SearchTest, TheLlmProposerAsksTheImplementerForAStrategy) {
  ServerProcess server({"--local-runners", "1"});
  const std::string kernel = ReadText(std::filesystem::path(KERNELGYM_SOURCE_DIR) / "tests/honest/softmax_rows_avx2/kernel.cpp");
  nlohmann::json script = {{"default", nlohmann::json::array()}};
  script["default"].push_back({{"content", "Here it is.\n```cpp\n" + kernel + "```\n"}});
  llm::ScriptedServer model(script);
  model.Start();
  const std::filesystem::path graph_file = server.dir() / "llm.json";
  const ProcessResult run =
      RunCli({"search", "--task", "cpu/softmax_rows", "--proposer", "llm", "--algorithm", "beam", "--branches", "3",
              "--max-evaluations", "3", "--depth", "1", "--endpoint", model.base_url(), "--model", "scripted", "--connect",
              server.clients(), "--graph", graph_file.string(), "--record"});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  const nlohmann::json graph = ReadJson(graph_file);
  ASSERT_EQ(graph["nodes"].size(), 2u) << "three replies, one distinct kernel";
  EXPECT_EQ(graph["nodes"][1]["proposer"], "llm");
  EXPECT_GT(BestSpeedup(graph), 1.5 * StarterSpeedup(graph));
  ASSERT_EQ(model.requests().size(), 3u);
  for (const llm::ScriptedRequest& r : model.requests())
    EXPECT_NE(r.body["messages"][1]["content"].get<std::string>().find("Apply this optimization strategy"),
              std::string::npos);
  ASSERT_EQ(server.Terminate(30), 0);
  int exchanges = 0, produced_none = 0;
  TrajectoryReader reader(server.store());
  for (nlohmann::json record; reader.Next(record);) {
    if (!record.contains("meta")) continue;
    for (const nlohmann::json& e : record["meta"].value("exchanges", nlohmann::json::array())) {
      ++exchanges;
      produced_none += e["produced_step"] == false;
    }
  }
  EXPECT_EQ(exchanges, 3);
  EXPECT_EQ(produced_none, 2) << "the two replies that repeated the first were not evaluated: no step of theirs";
}

// The parallel algorithm asks a model for exactly the proposals it evaluates, for all chains at
// once; a reply that repeats a kernel already in the graph is refused with a repair turn before
// it costs an evaluation; and every exchange is recorded with the step it produced, so that the
// chat export credits each reply with its own kernel's reward.
TEST(SearchTest, LlmProposalsAreAskedAsUsedInParallelAndRecordedWithTheirOwnStep) {
  ServerProcess server({"--local-runners", "1"});
  const std::filesystem::path source_dir(KERNELGYM_SOURCE_DIR);
  const std::string starter = ReadText(source_dir / "datasets/suites/cpu/softmax_rows/starter.cpp");
  const std::string fast = ReadText(source_dir / "tests/honest/softmax_rows_avx2/kernel.cpp");
  nlohmann::json replies = nlohmann::json::array();
  for (const std::string& kernel : {starter, starter, fast, "// another\n" + fast})
    replies.push_back({{"content", "```cpp\n" + kernel + "```\n"}, {"delay_s", 0.3}});
  llm::ScriptedServer model(nlohmann::json{{"default", replies}});
  model.Start();
  const std::filesystem::path graph_file = server.dir() / "parallel.json";
  const ProcessResult run =
      RunCli({"search", "--task", "cpu/softmax_rows", "--proposer", "llm", "--algorithm", "parallel", "--runs", "2",
              "--max-evaluations", "2", "--endpoint", model.base_url(), "--model", "scripted", "--connect",
              server.clients(), "--graph", graph_file.string(), "--record"});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  const nlohmann::json graph = ReadJson(graph_file);
  ASSERT_EQ(graph["nodes"].size(), 3u);
  // 2 evaluations for 4 calls: each chain's first reply repeated the starter and was answered with
  // a repair turn (the old search asked 4 proposals per chain and evaluated 1).
  ASSERT_EQ(model.requests().size(), 4u);
  int repairs = 0;
  for (const llm::ScriptedRequest& r : model.requests())
    repairs += r.body.dump().find("identical to one already evaluated") != std::string::npos;
  EXPECT_EQ(repairs, 2);
  EXPECT_EQ(model.max_in_flight(), 2) << "the two chains' proposals are asked at once";

  ASSERT_EQ(server.Terminate(30), 0);
  TrajectoryReader reader(server.store());
  int credited = 0;
  for (nlohmann::json record; reader.Next(record);) {
    if (record["kind"] != "transition" || !record.contains("meta")) continue;
    const std::string source = record["observation"]["source"].get<std::string>();
    for (const nlohmann::json& e : record["meta"].value("exchanges", nlohmann::json::array())) {
      if (e.contains("parse_error") || e["produced_step"] == false) continue;
      ++credited;
      EXPECT_NE(e["completion"].get<std::string>().find(source), std::string::npos)
          << "an exchange recorded with a step whose kernel it did not write";
    }
  }
  EXPECT_EQ(credited, 2);
}

// kill -9 in the middle of a search, then --resume: the saved nodes are kept as they were and
// the search goes on to its budget, never evaluating a kernel twice.
TEST(SearchTest, AKilledSearchResumesFromItsSavedGraph) {
  ServerProcess server({"--local-runners", "1"});
  const std::filesystem::path graph_file = server.dir() / "resume.json";
  // softmax_rows' template has 8 settings: UCB can reach all of them, so 7 evaluations are always possible.
  const pid_t first = SpawnLogged({KERNELGYM_CLI, "search", "--task", "cpu/softmax_rows", "--proposer", "knobs",
                                   "--algorithm", "ucb", "--max-evaluations", "7", "--connect",
                                   server.clients(), "--graph", graph_file.string()},
                                  server.dir() / "first-search.log");
  ASSERT_GT(first, 0);
  const bool progressed = WaitFor(
      [&] {
        if (!std::filesystem::exists(graph_file)) return false;
        const nlohmann::json g = nlohmann::json::parse(ReadText(graph_file), nullptr, /*allow_exceptions=*/false);
        return g.is_object() && g["nodes"].size() >= 4;
      },
      300);
  kill(first, SIGKILL);
  waitpid(first, nullptr, 0);
  ASSERT_TRUE(progressed) << ReadText(server.dir() / "first-search.log");
  const nlohmann::json before = ReadJson(graph_file);
  ASSERT_LT(before["nodes"].size(), 8u) << "the search finished before it was killed";

  const ProcessResult resumed = RunCli({"search", "--resume", "--graph", graph_file.string(), "--max-evaluations", "7",
                                     "--connect", server.clients()});
  ASSERT_TRUE(resumed.ok()) << resumed.Describe() << resumed.stderr_text;
  EXPECT_NE(resumed.stderr_text.find("resuming"), std::string::npos);
  const nlohmann::json after = ReadJson(graph_file);
  EXPECT_EQ(after["nodes"].size(), 8u);  // the root and 7 evaluations in all
  // Every saved node is kept as it was (its evaluation; only the algorithm's counters move on).
  auto evaluation = [](nlohmann::json node) {
    node.erase("visits");
    node.erase("kept");
    return node;
  };
  for (std::size_t i = 0; i < before["nodes"].size(); ++i)
    EXPECT_EQ(evaluation(after["nodes"][i]), evaluation(before["nodes"][i])) << "node " << i;
  std::set<std::string> settings;
  for (const nlohmann::json& n : after["nodes"])
    if (!n["knobs"].empty()) {
      EXPECT_TRUE(settings.insert(n["knobs"].dump()).second) << "a setting evaluated twice";
    }
  EXPECT_EQ(after["final_evaluation"]["status"], "ok");
}

// evaluate: two policies on a task, recorded; every number of the report is the recorded
// submit's, and the comparison and the plot are written.
TEST(EvaluateTest, TheReportsNumbersAreTheRecordedEpisodes) {
  const std::filesystem::path dir = TestTempDir() / "evaluate";
  const std::filesystem::path store = dir / "store";
  const ProcessResult run = RunCli({"evaluate", "--policy", "starter", "--policy", "random-knobs", "--suite", "cpu", "--task",
                                 "cpu/silu_mul", "--max-evaluations", "2", "--out",
                                 (dir / "out").string(), "--record-dir", store.string()});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  std::multimap<std::string, double> submits;  // task -> the speedup of every recorded submit
  TrajectoryReader reader(store);
  for (nlohmann::json record; reader.Next(record);)
    if (record["kind"] == "transition" && record["action"]["kind"] == "submit")
      submits.emplace(record["task"].get<std::string>(), record["observation"]["speedup"].get<double>());
  EXPECT_EQ(submits.size(), 2u);
  for (const std::string policy : {"starter", "random-knobs"}) {
    const nlohmann::json report = ReadJson(dir / "out" / (policy + ".json"));
    ASSERT_EQ(report["outcomes"].size(), 1u);
    int correct = 0;
    for (const nlohmann::json& o : report["outcomes"]) {
      const auto [from, to] = submits.equal_range(o["task"].get<std::string>());
      bool found = false;
      for (auto it = from; it != to; ++it) found |= it->second == o["speedup"].get<double>();
      EXPECT_TRUE(found) << policy << " " << o["task"] << ": " << o["speedup"] << " is no recorded submit";
      correct += o["correct"].get<bool>();
    }
    EXPECT_EQ(report["metrics"]["correct"], correct);
  }
  const std::string svg = ReadText(dir / "out" / "speedups.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("random-knobs"), std::string::npos);
  EXPECT_NE(ReadText(dir / "out" / "comparison.md").find("| fast_1.0 |"), std::string::npos);
}

// evaluate --backend pallas off a TPU: nothing is timed, so the report's speedup is the estimate
// each submit was paid (its step info's estimated_speedup), labelled as one; before, it read the
// observation's measured speedup and every pallas task scored 0.
TEST(EvaluateTest, APallasSuiteIsScoredByThePaidEstimate) {
  const std::filesystem::path dir = TestTempDir() / "evaluate-pallas";
  const std::filesystem::path store = dir / "store";
  // random-knobs with one evaluation: the pallas version's own template (pallas.json) is the one
  // it moves (before, it saw task.json's knobs only, found none and submitted the starter).
  const ProcessResult run = RunCli({"evaluate", "--policy", "starter", "--policy", "random-knobs", "--suite",
                                    "jaxbench-p", "--backend", "pallas", "--task", "jaxbench-p/rms_norm",
                                    "--max-evaluations", "1", "--seed", "3", "--out", (dir / "out").string(),
                                    "--record-dir", store.string()});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("no knob template"), std::string::npos) << run.stderr_text;
  const nlohmann::json knobs_report = ReadJson(dir / "out" / "random-knobs.json");
  ASSERT_EQ(knobs_report["outcomes"].size(), 1u);
  EXPECT_GE(knobs_report["outcomes"][0]["steps"].get<int>(), 2) << "a knobs step, then the submit";
  double paid = -1;
  TrajectoryReader reader(store);
  for (nlohmann::json record; reader.Next(record);)
    if (record["kind"] == "transition" && record["action"]["kind"] == "submit" && record.contains("meta") &&
        record["meta"].value("policy", "") == "starter") {
      EXPECT_EQ(record["observation"]["speedup"], 0.0) << "off a TPU nothing is measured";
      ASSERT_EQ(record["info"]["speedup_kind"], "estimated") << record["info"].dump();
      paid = record["info"]["estimated_speedup"].get<double>();
    }
  ASSERT_GT(paid, 0) << "no submit recorded with a paid estimate";
  const nlohmann::json report = ReadJson(dir / "out" / "starter.json");
  ASSERT_EQ(report["outcomes"].size(), 1u);
  const nlohmann::json& o = report["outcomes"][0];
  EXPECT_TRUE(o["correct"].get<bool>()) << o.dump();
  EXPECT_EQ(o["speedup"].get<double>(), paid);
  EXPECT_EQ(o["starter_speedup"].get<double>(), paid) << "the reset's paid estimate";
  EXPECT_EQ(o["speedup_kind"], "estimated");
  EXPECT_EQ(report["metrics"]["fast_p"]["fast_0"], 1.0);
  EXPECT_NE(ReadText(dir / "out" / "starter.md").find("*est.*"), std::string::npos) << "the estimate is labelled";
}

// collect: a dataset folder whose card's counts are the files' contents.
TEST(CollectTest, WritesADatasetWithItsCard) {
  const std::filesystem::path out = TestTempDir() / "collected";
  std::filesystem::remove_all(out);
  const ProcessResult run = RunCli({"collect", "--policy", "random-knobs", "--suite", "cpu", "--task", "cpu/rms_norm",
                                 "--max-evaluations", "3", "--out", out.string()});
  ASSERT_TRUE(run.ok()) << run.Describe() << run.stderr_text;
  const nlohmann::json card = ReadJson(out / "card.json");
  std::istringstream lines(ReadText(out / "transitions.jsonl"));
  int rows = 0;
  std::set<std::string> sources;
  for (std::string line; std::getline(lines, line); ++rows) {
    EXPECT_TRUE(sources.insert(nlohmann::json::parse(line)["source"].get<std::string>()).second) << "a duplicate kernel";
  }
  EXPECT_EQ(card["counts"]["distinct_kernels"], rows);
  EXPECT_EQ(card["counts"]["transitions"].get<int>(), rows + card["counts"]["duplicate_kernels_left_out"].get<int>());
  EXPECT_EQ(card["counts"]["episodes"], 1);
  EXPECT_EQ(card["policy"], "random-knobs");
  EXPECT_FALSE(card["provenance"]["runners"].empty());
  EXPECT_NE(ReadText(out / "card.md").find("# Dataset card"), std::string::npos);
  // A second collect into the same folder is refused rather than mixing datasets.
  EXPECT_EQ(RunCli({"collect", "--policy", "starter", "--suite", "cpu", "--out", out.string()}).exit_code, 2);
}

}  // namespace
}  // namespace kernelgym::testing
