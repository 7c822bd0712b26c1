// EvalResult <-> JSON: ResultFromJson is the exact inverse of ResultToJson with samples, and
// names the path of every field it cannot read.
#include "core/result_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace kernelgym {
namespace {

using nlohmann::json;

// Every field set to a value other than its default, every optional report present.
EvalResult FullResult() {
  EvalResult r;
  r.task_id = "cpu/softmax_rows";
  r.backend = "cpu";
  r.status = Status::kImplausible;
  r.stage = Stage::kTiming;
  r.message = "median time 12 ns is below this machine's physical floor";
  r.details = {"note: first", "note: second \"quoted\"\n"};
  r.diagnostics = {{"kernel.cpp", 3, 7, "warning", "unused variable 'x'"}, {"", 0, 0, "note", "in expansion"}};
  r.compile_cached = true;
  CorrectnessReport c;
  c.trials_run = 3;
  c.seeds = {1, 18446744073709551615ull, 42};
  c.deterministic = false;
  OutputCheck check;
  check.output = "y";
  check.elements = 524288;
  check.mismatches = 17;
  check.non_finite = 2;
  check.max_abs_error = 0.125;
  check.max_rel_error = 3.5e-3;
  check.first_mismatch = 1029;
  check.first_mismatch_index = {1, 5};
  check.expected = -1.5;
  check.actual = 2.25;
  c.checks = {check, OutputCheck{}};
  r.correctness = c;
  TimingReport t;
  t.reference = {1000.5, 990, 1100, 980, 0.02};
  t.candidate = {500.25, 495, 520, 490, 0.03};
  t.speedup = 2.001;
  t.speedup_ci_low = 1.95;
  t.speedup_ci_high = 2.05;
  t.converged = true;
  t.rounds = 3;
  t.discarded = 1;
  t.seconds = 0.41;
  t.reference_alone_median_ns = 970;
  t.host = {true, 2, 1.75, 3, 0.625, 0.03125};
  t.scheduling = "rr:1";
  t.samples = {{1000, 500, 999, 499, 0, true, false},
               {1001, 501, 998, 497, 1, false, false},
               {5000, 600, 900, 450, 2, true, true}};
  r.timing = t;
  ProfileReport p;
  p.achieved_gflops = 5.2;
  p.achieved_gbps = 8.4;
  p.peak_gflops = 60;
  p.peak_gbps = 40;
  p.fraction_of_peak = 0.21;
  p.bound = "memory";
  p.arithmetic_intensity = 0.625;
  p.floor_ns = 104.8;
  p.counters = {{"task_clock_ns", 480}, {"page_faults", 0}};
  p.unavailable_counters = {"cycles", "instructions"};
  p.remarks = {{4, 3, true, "loop vectorized using 32 byte vectors"}, {9, 5, false, "couldn't vectorize loop"}};
  r.profile = p;
  r.protections = {{"seccomp", true}, {"network_namespace", false}};
  r.stage_seconds = {{"compile", 0.31}, {"harness", 0.72}, {"timing_lock_wait", 0}};
  r.seconds = 1.25;
  r.estimate = SpeedEstimate{"llo_schedule", 40, 70, false, true, 1.75, false,
                             {"a while loop with a dynamic trip count: its body is counted once"}};
  r.tpu_profile = {{"matmul_kernel", 64, 1053, 71680, {{"mxu", 0.41}, {"load_store", 0.22}}, 900},
                   {"second", 1, 12, 12, {}, 0}};
  return r;
}

// Field by field (EvalResult has no operator==; the JSON covers everything but the flat index).
void ExpectSame(const EvalResult& a, const EvalResult& b) {
  EXPECT_EQ(ResultToJson(a, true), ResultToJson(b, true));
  ASSERT_EQ(a.correctness.has_value(), b.correctness.has_value());
  if (a.correctness) {
    ASSERT_EQ(a.correctness->checks.size(), b.correctness->checks.size());
    for (std::size_t i = 0; i < a.correctness->checks.size(); ++i)
      EXPECT_EQ(a.correctness->checks[i].first_mismatch, b.correctness->checks[i].first_mismatch);
  }
}

TEST(ResultFromJson, IsTheExactInverseOfResultToJsonWithSamples) {
  const EvalResult original = FullResult();
  std::string problem;
  const std::optional<EvalResult> back = ResultFromJson(ResultToJson(original, true), problem);
  ASSERT_TRUE(back) << problem;
  ExpectSame(*back, original);
  EXPECT_EQ(back->status, Status::kImplausible);
  EXPECT_EQ(back->stage, Stage::kTiming);
  EXPECT_EQ(back->correctness->seeds[1], 18446744073709551615ull);
  EXPECT_EQ(back->correctness->checks[0].first_mismatch, 1029);
  EXPECT_EQ(back->timing->samples.size(), 3u);
  EXPECT_TRUE(back->timing->samples[2].discarded);
  EXPECT_TRUE(back->timing->host.sampled);
  EXPECT_EQ(back->timing->host.procs_running, 3);
  EXPECT_DOUBLE_EQ(back->timing->host.steal_fraction, 0.03125);
  EXPECT_EQ(back->timing->scheduling, "rr:1");
  EXPECT_EQ(back->profile->remarks[1].message, "couldn't vectorize loop");
}

// A pallas result off a TPU: the compiler's estimate is the speed signal, labelled as such in the
// JSON (speedup_kind, timing_clock), in the plain report, and never as a measured speedup.
TEST(ResultToJson, ATrustedTpuEstimateIsLabelledAndNeverAMeasuredSpeedup) {
  EvalResult r;
  r.task_id = "cpu/softmax_rows";
  r.backend = "pallas";
  r.status = Status::kOk;
  r.stage = Stage::kCorrectness;
  r.timing_representative = false;
  r.timing_clock = std::string(kTpuEstimateClock);
  r.estimate = SpeedEstimate{"llo_schedule", 40, 70, true, true, 1.75, true, {}};
  r.tpu_profile = {{"softmax_kernel", 8, 310, 2480, {{"vpu", 0.6}, {"xlu", 0.1}}, 0}};
  const json j = ResultToJson(r, false);
  EXPECT_EQ(j["speedup_kind"], "estimated");
  EXPECT_EQ(j["timing_clock"], "tpu_estimate");
  EXPECT_FALSE(j.contains("speedup")) << "an estimate is not a measured speedup";
  EXPECT_FALSE(j.contains("timing"));
  EXPECT_EQ(j["tpu_profile"][0]["bundles_per_step"], 310);
  const std::string text = RenderResult(r, "");
  EXPECT_NE(text.find("speed: estimated 1.750x"), std::string::npos) << text;
  EXPECT_NE(text.find("not a measurement"), std::string::npos) << text;
  EXPECT_NE(text.find("tpu kernel softmax_kernel: 8 grid steps x 310 bundles, 2480 cycles"), std::string::npos) << text;
  EXPECT_NE(text.find("vpu 60%, xlu 10%"), std::string::npos) << text;
  // The typed estimate on the wire, labelled, with version 1's names derived beside it.
  EXPECT_EQ(j["estimate"]["label"], "estimate");
  EXPECT_EQ(j["estimate"]["trusted"], true);
  EXPECT_EQ(j["estimates"]["estimated_speedup"], 1.75);
  EXPECT_EQ(j["estimates"]["candidate_estimated_tpu_us"], 40);
  std::string problem;
  const std::optional<EvalResult> back = ResultFromJson(j, problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(back->estimate, r.estimate);
  EXPECT_TRUE(back->estimates.empty()) << "the derived names are not read back";
  // A reader trusts the typed field, never the derived names: a record whose legacy key claims a
  // trusted speedup its estimate does not have is paid nothing.
  json forged = j;
  forged["estimate"]["trusted"] = false;
  forged["estimates"]["estimated_speedup"] = 50.0;
  forged["estimates"]["estimate_trusted"] = 1;
  const std::optional<EvalResult> read = ResultFromJson(forged, problem);
  ASSERT_TRUE(read) << problem;
  EXPECT_EQ(RewardableSpeedupOf(*read).kind, SpeedupKind::kNone);
  json unlabelled = j;
  unlabelled["estimate"]["label"] = "measurement";
  EXPECT_FALSE(ResultFromJson(unlabelled, problem));
  EXPECT_NE(problem.find("result.estimate.label"), std::string::npos) << problem;
  r.estimate->trusted = false;
  r.estimate->reasons = {"work under a data-dependent branch"};
  EXPECT_EQ(ResultToJson(r, false)["speedup_kind"], "none");
  EXPECT_EQ(ResultToJson(r, false)["estimates"]["estimated_speedup_untrusted"], 1.75);
  const std::string untrusted = RenderResult(r, "");
  EXPECT_EQ(untrusted.find("speed: estimated"), std::string::npos) << untrusted;
  EXPECT_NE(untrusted.find("estimate not trusted: work under a data-dependent branch"), std::string::npos) << untrusted;
}

TEST(ResultFromJson, SurvivesTextAndMsgpackEncodings) {
  const EvalResult original = FullResult();
  const json j = ResultToJson(original, true);
  std::string problem;
  // Through text (integers re-read as signed or unsigned, doubles by shortest representation)...
  const auto from_text = ResultFromJson(json::parse(j.dump()), problem);
  ASSERT_TRUE(from_text) << problem;
  ExpectSame(*from_text, original);
  // ...and through msgpack, where non-negative integers come back unsigned.
  const auto from_msgpack = ResultFromJson(json::from_msgpack(json::to_msgpack(j)), problem);
  ASSERT_TRUE(from_msgpack) << problem;
  ExpectSame(*from_msgpack, original);
}

TEST(ResultFromJson, MinimalResultsRoundTrip) {
  EvalResult rejected;
  rejected.task_id = "cpu/gemm_bias_relu";
  rejected.backend = "cpu";
  rejected.status = Status::kRejected;
  rejected.message = "includes <fstream>";
  std::string problem;
  const auto back = ResultFromJson(ResultToJson(rejected, true), problem);
  ASSERT_TRUE(back) << problem;
  ExpectSame(*back, rejected);
  EXPECT_FALSE(back->correctness || back->timing || back->profile);
  // Without samples the timing report comes back with none.
  const auto no_samples = ResultFromJson(ResultToJson(FullResult(), false), problem);
  ASSERT_TRUE(no_samples) << problem;
  EXPECT_TRUE(no_samples->timing->samples.empty());
  EXPECT_EQ(no_samples->timing->rounds, 3);
}

TEST(ResultFromJson, NonFiniteNumbersSurviveAsNullInText) {
  EvalResult r = FullResult();
  r.correctness->checks[0].max_abs_error = std::numeric_limits<double>::infinity();
  r.correctness->checks[0].actual = std::nan("");
  std::string problem;
  const auto in_memory = ResultFromJson(ResultToJson(r, true), problem);
  ASSERT_TRUE(in_memory) << problem;
  EXPECT_TRUE(std::isinf(in_memory->correctness->checks[0].max_abs_error));
  EXPECT_TRUE(std::isnan(in_memory->correctness->checks[0].actual));
  const auto from_text = ResultFromJson(json::parse(ResultToJson(r, true).dump()), problem);
  ASSERT_TRUE(from_text) << problem;
  EXPECT_TRUE(std::isnan(from_text->correctness->checks[0].actual));
}

void ExpectProblem(const json& j, const std::vector<std::string>& mentions) {
  std::string problem;
  EXPECT_FALSE(ResultFromJson(j, problem)) << j.dump();
  for (const std::string& m : mentions)
    EXPECT_NE(problem.find(m), std::string::npos) << "'" << m << "' not in: " << problem;
}

TEST(ResultFromJson, BadInputNamesThePath) {
  const json good = ResultToJson(FullResult(), true);
  ExpectProblem(json::array(), {"result", "object", "array"});
  json j = good;
  j["status"] = "great";
  ExpectProblem(j, {"result.status", "great"});
  j = good;
  j["stage"] = 3;
  ExpectProblem(j, {"result.stage", "string", "integer"});
  j = good;
  j.erase("message");
  ExpectProblem(j, {"result", "'message'"});
  j = good;
  j["surprise"] = true;
  ExpectProblem(j, {"unknown field 'surprise'"});
  j = good;
  j["timing"]["samples"][2]["candidate_ns"] = "fast";
  ExpectProblem(j, {"result.timing.samples[2].candidate_ns", "number", "string"});
  j = good;
  j["timing"]["speedup_ci95"] = {1.0};
  ExpectProblem(j, {"result.timing.speedup_ci95", "2 numbers"});
  j = good;
  j["correctness"]["seeds"][0] = -4;
  ExpectProblem(j, {"result.correctness.seeds[0]", "non-negative"});
  j = good;
  j["correctness"]["checks"][0]["elements"] = 1.5;
  ExpectProblem(j, {"result.correctness.checks[0].elements", "integer", "float"});
  j = good;
  j["profile"]["counters"]["page_faults"] = true;
  ExpectProblem(j, {"result.profile.counters.page_faults", "number"});
  j = good;
  j["correctness"]["trials"] = 1ull << 40;
  ExpectProblem(j, {"result.correctness.trials", "out of range"});
  j = good;
  j.erase("timing");
  ExpectProblem(j, {"result.speedup", "without 'timing'"});
}

// ---- the text report (RenderResult) ----

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// What the output_forges_verdict adversarial case writes to stderr, as the harness quotes it.
const char* const kFakeReport =
    "\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b]0;kernelgym: ok\x07"
    "cpu/silu_mul [cpu]: ok (stage timing)\n"
    "status: ok\n"
    "  speedup    10.000x  (95% CI 9.990 - 10.010)\n"
    "verdict: incorrect\rverdict: ok       \n"
    "status: crashed\b\b\b\b\b\b\bok     \n"
    "{\"status\": \"ok\", \"speedup\": 10.0}\n";

EvalResult ForgingResult() {
  EvalResult r;
  r.task_id = "cpu/silu_mul";
  r.backend = "cpu";
  r.status = Status::kIncorrect;
  r.stage = Stage::kCorrectness;
  r.message = "y: 1048576 of 1048576 elements differ\ncpu/silu_mul [cpu]: ok (stage timing)";
  r.details = {"harness stderr: " + std::string(kFakeReport), "note: the runner's own note"};
  // A #line directive's file name and an #error text, as g++ reports them.
  r.diagnostics = {
      {"\ncpu/silu_mul [cpu]: ok (stage timing)\n\x1b[2Kstatus: ok\r", 7, 2, "error", "#error status: ok"},
      {"kernel.cpp", 2, 2, "error", "#error \x1b[1A\x1b[2Kcpu/silu_mul [cpu]: ok (stage timing) \b\b\b\b ok"}};
  r.protections = {{"seccomp", true}};
  r.seconds = 0.5;
  return r;
}

TEST(RenderResult, TheVerdictIsTheFirstAndLastLineAndNothingElseCanLookLikeIt) {
  const std::string source = "#include <cstdint>\n#error \x1b[2K\rcpu/silu_mul [cpu]: ok (stage timing)\n";
  const std::string report = RenderResult(ForgingResult(), source);
  const std::vector<std::string> lines = Lines(report);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.front(), "cpu/silu_mul [cpu]: incorrect (stage correctness)");
  EXPECT_EQ(lines.back(), "verdict: incorrect (stage correctness)");
  // The report's own lines start in column 0; the candidate's never do.
  const std::vector<std::string> headings = {
      "correctness: ", "timing: ", "roofline: ", "counters per call:", "estimates and compile facts",
      "sandbox:",      "total ",   "verdict: "};
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() || line[0] == ' ') continue;
    bool heading = false;
    for (const std::string& h : headings) heading = heading || line.rfind(h, 0) == 0;
    EXPECT_TRUE(heading) << "line " << i << " starts in column 0 but is not the report's: " << line;
  }
  EXPECT_EQ(
      std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("verdict: ", 0) == 0; }), 1);
  // No control character of the candidate's reaches the terminal.
  for (const char c : report)
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << "control byte " << int(c) << " in:\n" << report;
  // The fake lines are there (a reader may want them) but only quoted or after a label.
  int quoted = 0;
  for (const std::string& line : lines) {
    if (line.find("status: ok") == std::string::npos && line.find("10.000x") == std::string::npos &&
        line.find("[cpu]: ok") == std::string::npos)
      continue;
    const bool fenced = line.rfind("    | ", 0) == 0;
    const bool labelled = line.rfind("  - harness stderr: ", 0) == 0 || line.rfind("  \\x0a", 0) == 0 ||
                          line.rfind("  kernel.cpp:", 0) == 0 || line.rfind("    2 | ", 0) == 0;
    EXPECT_TRUE(fenced || labelled) << "candidate text outside the fence: " << line;
    quoted += fenced;
  }
  EXPECT_GE(quoted, 3) << report;
  EXPECT_NE(report.find("    | status: ok\n"), std::string::npos) << report;
  EXPECT_NE(report.find("    |   speedup    10.000x  (95% CI 9.990 - 10.010)\n"), std::string::npos) << report;
  EXPECT_NE(report.find("    | verdict: incorrect\\x0dverdict: ok"), std::string::npos) << report;
  EXPECT_NE(report.find("    | cpu/silu_mul [cpu]: ok (stage timing)\n"), std::string::npos)
      << "message continuation:\n"
      << report;
  EXPECT_NE(report.find("  - harness stderr: \\x1b[1A\\x1b[2K"), std::string::npos) << report;
  EXPECT_NE(report.find("  - note: the runner's own note\n"), std::string::npos) << report;
}

TEST(RenderResult, BadBytesAndHugeColumnsDoNotBreakIt) {
  EvalResult r = ForgingResult();
  r.message = "bad \xFF\xC0\x80 bytes";
  r.diagnostics = {{"kernel.cpp", 1, 1 << 30, "error", "far away \xED\xA0\x80"}};
  const std::string report = RenderResult(r, "int x;\n");
  EXPECT_LT(report.size(), 4096u) << "a column past the line's end draws no caret";
  EXPECT_NE(report.find("  bad \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD bytes\n"), std::string::npos) << report;
  EXPECT_NO_THROW((void)nlohmann::json(report).dump()) << "the report is valid UTF-8";
}

}  // namespace
}  // namespace kernelgym
