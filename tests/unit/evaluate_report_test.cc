// Evaluation reports: the metrics on hand-computed examples, the JSON record (round trip and
// malformed input), and the Markdown and SVG renderings.
#include "policies/evaluate/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kernelgym::evaluate {
namespace {

TaskOutcome Outcome(std::string task, bool correct, double speedup) {
  TaskOutcome o;
  o.task = std::move(task);
  o.correct = correct;
  o.speedup = correct ? speedup : 0;
  o.status = correct ? "ok" : "incorrect";
  return o;
}

TaskOutcome Outcome(std::string task, bool correct, double speedup, double best, double starter, int64_t steps,
                    double seconds, int64_t chat_calls, int64_t prompt_tokens, int64_t completion_tokens) {
  TaskOutcome o = Outcome(std::move(task), correct, speedup);
  o.best_speedup = best;
  o.starter_speedup = starter;
  o.steps = steps;
  o.seconds = seconds;
  o.chat_calls = chat_calls;
  o.prompt_tokens = prompt_tokens;
  o.completion_tokens = completion_tokens;
  return o;
}

// Final speedups 2.0, 0.5, failed, 4.0 — in an order that is not alphabetical, to see task order kept.
std::vector<TaskOutcome> Example() {
  return {Outcome("softmax", true, 2.0, 2.5, 1.0, 3, 1.5, 2, 1000, 200),
          Outcome("relu", true, 0.5, 0.8, 0.4, 4, 2.5, 3, 2000, 300),
          Outcome("conv", false, 0, 0, 1.0, 5, 3.0, 4, 3000, 400),
          Outcome("matmul", true, 4.0, 4.0, 1.0, 2, 1.0, 1, 4000, 100)};
}

Report ExampleReport() {
  Report report;
  report.policy = "knob-search(budget=16)";
  report.suite = "level1";
  report.backend = "cpu";
  report.created = "2024-05-01T12:00:00Z";
  report.provenance = {{"seed", 7}, {"server", "tcp://127.0.0.1:5555"}};
  report.outcomes = Example();
  report.metrics = ComputeMetrics(report.outcomes, {3, 15});
  return report;
}

TEST(FastPKey, NamesEachThreshold) {
  EXPECT_EQ(FastPKey(0), "fast_0");
  EXPECT_EQ(FastPKey(1.0), "fast_1.0");
  EXPECT_EQ(FastPKey(1.2), "fast_1.2");
  EXPECT_EQ(FastPKey(1.5), "fast_1.5");
  EXPECT_EQ(FastPKey(2), "fast_2.0");
}

TEST(ComputeMetrics, HandComputedExample) {
  const Metrics m = ComputeMetrics(Example(), {3, 15});
  EXPECT_EQ(m.tasks, 4);
  EXPECT_EQ(m.correct, 3);
  ASSERT_EQ(m.fast_p.size(), 5u);
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_0"), 0.75);    // 2.0, 0.5, 4.0 of 4
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_1.0"), 0.5);   // 2.0, 4.0
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_1.2"), 0.5);   // 2.0, 4.0
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_1.5"), 0.5);   // 2.0, 4.0
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_2.0"), 0.25);  // 4.0 only: 2.0 is not > 2
  // (2 * 0.5 * 4)^(1/3) = 4^(1/3) = 2^(2/3)
  EXPECT_NEAR(m.geomean_correct, std::pow(2.0, 2.0 / 3), 1e-12);
  // (2 * 0.5 * 1 * 4)^(1/4) = 4^(1/4) = sqrt(2): the failed task counts as 1
  EXPECT_NEAR(m.geomean_failed_1, std::sqrt(2.0), 1e-12);
  EXPECT_EQ(m.geomean_failed_0, 0);
  EXPECT_EQ(m.steps, 14);                                   // 3 + 4 + 5 + 2
  EXPECT_DOUBLE_EQ(m.seconds, 8.0);                         // 1.5 + 2.5 + 3.0 + 1.0
  EXPECT_EQ(m.chat_calls, 10);                              // 2 + 3 + 4 + 1
  EXPECT_EQ(m.prompt_tokens, 10000);                        // 1000 + 2000 + 3000 + 4000
  EXPECT_EQ(m.completion_tokens, 1000);                     // 200 + 300 + 400 + 100
  EXPECT_DOUBLE_EQ(m.cost, (10000 * 3.0 + 1000 * 15.0) / 1e6);  // 0.045
  EXPECT_EQ(ComputeMetrics(Example()).cost, 0);             // no prices, no cost
}

TEST(ComputeMetrics, FailedAsZeroVersusFailedAsOne) {
  // All correct, 2 and 8: every geomean is sqrt(16) = 4.
  std::vector<TaskOutcome> outcomes = {Outcome("a", true, 2), Outcome("b", true, 8)};
  Metrics m = ComputeMetrics(outcomes);
  EXPECT_NEAR(m.geomean_correct, 4, 1e-12);
  EXPECT_NEAR(m.geomean_failed_1, 4, 1e-12);
  EXPECT_NEAR(m.geomean_failed_0, 4, 1e-12);
  // One failure: the strict reading drops to 0, the lenient one to (2 * 8 * 1)^(1/3) = 16^(1/3).
  outcomes.push_back(Outcome("c", false, 0));
  m = ComputeMetrics(outcomes);
  EXPECT_NEAR(m.geomean_correct, 4, 1e-12);
  EXPECT_NEAR(m.geomean_failed_1, std::cbrt(16.0), 1e-12);
  EXPECT_EQ(m.geomean_failed_0, 0);
}

TEST(ComputeMetrics, CorrectWithoutTimingIsCorrectButNotFast) {
  const Metrics m = ComputeMetrics({Outcome("a", true, 0)});
  EXPECT_EQ(m.correct, 1);
  EXPECT_EQ(m.fast_p.at("fast_0"), 0);
  EXPECT_EQ(m.geomean_correct, 0);  // no correct task with a timing
  EXPECT_EQ(m.geomean_failed_1, 1);
  EXPECT_EQ(m.geomean_failed_0, 0);
}

TEST(ComputeMetrics, EveryEpisodeIsOneSample) {
  TaskOutcome second = Outcome("a", false, 0);
  second.episode = 1;
  const Metrics m = ComputeMetrics({Outcome("a", true, 4), second});
  EXPECT_EQ(m.tasks, 2);
  EXPECT_DOUBLE_EQ(m.fast_p.at("fast_0"), 0.5);
  EXPECT_NEAR(m.geomean_failed_1, 2, 1e-12);  // sqrt(4 * 1)
}

TEST(ComputeMetrics, EmptyReportIsAllZero) {
  const Metrics m = ComputeMetrics({}, {3, 15});
  EXPECT_EQ(m.tasks, 0);
  EXPECT_EQ(m.correct, 0);
  ASSERT_EQ(m.fast_p.size(), 5u);
  for (const auto& [key, value] : m.fast_p) EXPECT_EQ(value, 0) << key;
  EXPECT_EQ(m.geomean_correct, 0);
  EXPECT_EQ(m.geomean_failed_1, 0);
  EXPECT_EQ(m.geomean_failed_0, 0);
  EXPECT_EQ(m.steps, 0);
  EXPECT_EQ(m.cost, 0);
}

TEST(ReportJson, RoundTripThroughTextIsExact) {
  Report report = ExampleReport();
  report.outcomes[0].speedup = 0.1 + 0.2;  // not a short decimal: must survive the text form bit for bit
  report.outcomes[1].seconds = 1.0 / 3;
  report.outcomes[2].prompt_tokens = int64_t{1} << 40;
  report.outcomes[3].episode = 2;
  report.outcomes[3].status = "error: \"quoted\" <and> unicode ✓";
  report.outcomes[3].speedup_kind = "estimated";
  const nlohmann::json written = ReportToJson(report);
  std::string error;
  const std::optional<Report> back = ReportFromJson(nlohmann::json::parse(written.dump()), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(ReportToJson(*back).dump(), written.dump());
  EXPECT_EQ(back->policy, report.policy);
  EXPECT_EQ(back->created, report.created);
  EXPECT_EQ(back->provenance, report.provenance);
  ASSERT_EQ(back->outcomes.size(), 4u);
  EXPECT_EQ(back->outcomes[0].speedup, 0.1 + 0.2);
  EXPECT_EQ(back->outcomes[1].seconds, 1.0 / 3);
  EXPECT_EQ(back->outcomes[2].prompt_tokens, int64_t{1} << 40);
  EXPECT_EQ(back->outcomes[3].episode, 2);
  EXPECT_EQ(back->outcomes[3].status, report.outcomes[3].status);
  EXPECT_EQ(back->outcomes[3].speedup_kind, "estimated");
  EXPECT_EQ(back->metrics.fast_p, report.metrics.fast_p);
  EXPECT_EQ(back->metrics.geomean_correct, report.metrics.geomean_correct);
  EXPECT_EQ(back->metrics.cost, report.metrics.cost);
}

TEST(ReportJson, MetricsAreReadAsWrittenNotRecomputed) {
  nlohmann::json j = ReportToJson(ExampleReport());
  j["metrics"]["geomean_correct"] = 9.5;
  std::string error;
  const std::optional<Report> back = ReportFromJson(j, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->metrics.geomean_correct, 9.5);
}

TEST(ReportJson, MalformedInputNamesTheField) {
  const nlohmann::json good = ReportToJson(ExampleReport());
  std::string error;
  auto expect_error = [&](const nlohmann::json& j, const std::string& expected) {
    error.clear();
    EXPECT_FALSE(ReportFromJson(j, error));
    EXPECT_EQ(error, expected);
  };
  nlohmann::json j = good;
  j["outcomes"][2]["speedup"] = "fast";
  expect_error(j, "outcomes[2].speedup: must be a number");
  j = good;
  j.erase("policy");
  expect_error(j, "policy: missing");
  j = good;
  j["metrics"]["fast_p"]["fast_1.0"] = nullptr;
  expect_error(j, "metrics.fast_p.fast_1.0: must be a number");
  j = good;
  j["outcomes"][0]["steps"] = 1.5;
  expect_error(j, "outcomes[0].steps: must be an integer");
  j = good;
  j["outcomes"][1]["correct"] = 1;
  expect_error(j, "outcomes[1].correct: must be a boolean");
  j = good;
  j["outcomes"] = nlohmann::json::object();
  expect_error(j, "outcomes: must be an array");
  expect_error(nlohmann::json::array(), "report: must be an object");
}

TEST(RenderMarkdown, MetricsAndTaskRowsInTaskOrder) {
  const std::string md = RenderMarkdown(ExampleReport());
  EXPECT_EQ(md.rfind("# knob-search(budget=16) on level1 (cpu)\n", 0), 0u) << md;
  for (const char* row :
       {"| fast_0 | 75.0% |", "| fast_1.0 | 50.0% |", "| fast_1.2 | 50.0% |", "| fast_2.0 | 25.0% |",
        "| geomean_correct | 1.59x |", "| geomean_failed_1 | 1.41x |", "| geomean_failed_0 | 0.00x |",
        "| tasks | 4 |", "| correct | 3 |", "| steps | 14 |", "| prompt tokens | 10000 |", "| cost | 0.0450 |",
        "| task | correct | speedup | best | starter | steps | seconds | tokens |",
        "| softmax | ✓ | 2.00x | 2.50x | 1.00x | 3 | 1.5 | 1200 |",
        "| conv | ✗ | — | — | 1.00x | 5 | 3.0 | 3400 |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << "missing " << row << " in\n" << md;
  }
  const size_t softmax = md.find("| softmax |"), relu = md.find("| relu |"), conv = md.find("| conv |"),
               matmul = md.find("| matmul |");
  EXPECT_LT(softmax, relu);
  EXPECT_LT(relu, conv);
  EXPECT_LT(conv, matmul);
  EXPECT_NE(matmul, std::string::npos);
}

// A pallas report off a TPU: its speedups are the TPU compiler's estimates, and say so; a report
// written before speedup_kind existed still reads.
TEST(RenderMarkdown, EstimatedSpeedupsAreLabelled) {
  Report report = ExampleReport();
  EXPECT_EQ(RenderMarkdown(report).find("*est.*"), std::string::npos);
  report.outcomes[0].speedup_kind = "estimated";
  const std::string md = RenderMarkdown(report);
  EXPECT_NE(md.find("| softmax | ✓ | 2.00x *est.* |"), std::string::npos) << md;
  EXPECT_NE(md.find("not measurements"), std::string::npos) << md;
  nlohmann::json older = ReportToJson(report);
  for (nlohmann::json& o : older["outcomes"]) o.erase("speedup_kind");
  std::string error;
  const std::optional<Report> back = ReportFromJson(older, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->outcomes[0].speedup_kind, "");
}

TEST(RenderComparisonMarkdown, ColumnPerReportBestInBoldDashWhenAbsent) {
  Report greedy, search;
  greedy.policy = "greedy";
  greedy.outcomes = {Outcome("t1", true, 2.0), Outcome("t2", true, 1.5), Outcome("t4", false, 0)};
  greedy.metrics = ComputeMetrics(greedy.outcomes);
  search.policy = "search";
  search.outcomes = {Outcome("t1", true, 3.0), Outcome("t3", true, 1.2), Outcome("t4", false, 0)};
  search.metrics = ComputeMetrics(search.outcomes);
  const std::string md = RenderComparisonMarkdown({greedy, search});
  for (const char* row : {"| metric | greedy | search |", "| fast_0 | 66.7% | 66.7% |", "| task | greedy | search |",
                          "| t1 | 2.00x | **3.00x** |", "| t2 | **1.50x** | — |", "| t3 | — | **1.20x** |",
                          "| t4 | ✗ | ✗ |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << "missing " << row << " in\n" << md;
  }
  // Rows in first-seen order: the first report's tasks, then those only the second has.
  EXPECT_LT(md.find("| t4 |"), md.find("| t3 |"));
}

// The value of attribute `name` in the first element found at or after `from`.
double Attribute(const std::string& svg, size_t from, const std::string& name) {
  const size_t at = svg.find(" " + name + "=\"", from);
  EXPECT_NE(at, std::string::npos) << name;
  return std::stod(svg.substr(at + name.size() + 3));
}

// The (x, y) points of the n-th polyline.
std::vector<std::pair<double, double>> PolylinePoints(const std::string& svg, int n) {
  size_t at = 0;
  for (int i = 0; i <= n; ++i) at = svg.find("<polyline", at + (i > 0));
  const size_t begin = svg.find("points=\"", at) + 8;
  std::istringstream in(svg.substr(begin, svg.find('"', begin) - begin));
  std::vector<std::pair<double, double>> points;
  double x, y;
  char comma;
  while (in >> x >> comma >> y) points.emplace_back(x, y);
  return points;
}

TEST(RenderSpeedupSvg, SelfContainedStepLinesWithEscapedLegend) {
  Report odd, plain;
  odd.policy = "a<b";
  odd.outcomes = {Outcome("t1", true, 2.0), Outcome("t2", false, 0), Outcome("t3", true, 0.5)};
  odd.metrics = ComputeMetrics(odd.outcomes);  // geomean_failed_1 = (2 * 1 * 0.5)^(1/3) = 1
  plain.policy = "plain & co";
  plain.outcomes = {Outcome("t1", true, 1.0), Outcome("t2", true, 3.0)};
  plain.metrics = ComputeMetrics(plain.outcomes);  // sqrt(3) = 1.73
  const std::string svg = RenderSpeedupSvg({odd, plain});

  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.find_last_not_of('\n') - 5, 6), "</svg>");
  EXPECT_EQ(svg.find("<svg", 1), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);  // nothing external
  EXPECT_EQ(svg.find("<style"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("a&lt;b (1.00x)"), std::string::npos) << svg;
  EXPECT_NE(svg.find("plain &amp; co (1.73x)"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  for (size_t at = svg.find('&'); at != std::string::npos; at = svg.find('&', at + 1)) {
    const std::string rest = svg.substr(at, 6);
    EXPECT_TRUE(rest.rfind("&lt;", 0) == 0 || rest.rfind("&gt;", 0) == 0 || rest.rfind("&amp;", 0) == 0 ||
                rest.rfind("&quot;", 0) == 0 || rest.rfind("&apos;", 0) == 0)
        << "a raw & at " << at;
  }
  for (const char* label : {">0.1x<", ">0.25x<", ">0.5x<", ">1x<", ">2x<", ">4x<", ">reference<", "stroke-dasharray"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;

  // Tick labels sit at their tick's height, so the floor's y is that of the "0.05x" label.
  const size_t floor_label = svg.rfind("<text", svg.find(">0.05x</text>"));
  const double floor_y = Attribute(svg, floor_label, "y");
  const auto odd_points = PolylinePoints(svg, 0);
  ASSERT_EQ(odd_points.size(), 6u);  // two points per task: a step
  EXPECT_DOUBLE_EQ(odd_points.back().second, floor_y);  // the failed task is last, on the floor
  EXPECT_LT(odd_points.front().second, odd_points[2].second);  // 2.0 above 0.5: sorted decreasing
  for (const auto& [x, y] : PolylinePoints(svg, 1)) EXPECT_LT(y, floor_y);  // no failure, nothing on the floor
}

TEST(RenderSpeedupSvg, NoReportsIsStillAValidPlot) {
  const std::string svg = RenderSpeedupSvg({});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  for (const char* bad : {"=\"nan", "=\"-nan", "=\"inf", "=\"-inf"}) EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
}

}  // namespace
}  // namespace kernelgym::evaluate
