// Observations (env/episode/observation.h): the structured fields, the Markdown text for language
// models (deterministic, quoting what a policy needs) and the feature vector (fixed length,
// always finite).
#include "env/episode/observation.h"

#include <gtest/gtest.h>

#include <sstream>

#include <cmath>
#include <limits>
#include <set>

#include "core/result_json.h"

namespace kernelgym {
namespace {

const char* kSource =
    "#include <cstdint>\n"                                               // 1
    "extern \"C\" void kernel(const float* x, float* y, int64_t N) {\n"  // 2
    "    for (int64_t i = 0; i < N; ++i)\n"                              // 3
    "        y[i] = foo(x[i]);\n"                                        // 4
    "}\n";                                                               // 5

Task TestTask() {
  Task task;
  task.id = "tst/scale";
  task.flops = 2e6;
  task.bytes = 8e6;
  return task;
}

const Task& TheTask() {
  static const Task task = TestTask();
  return task;
}

ObservationContext Context(const std::string& source = kSource) {
  static std::vector<std::unique_ptr<std::string>> sources;  // outlive the contexts that refer to them
  sources.push_back(std::make_unique<std::string>(source));
  return ObservationContext{.task = TheTask(),
                            .source = *sources.back(),
                            .step = 3,
                            .best_speedup = 1.5,
                            .steps_left = 17,
                            .max_steps = 20,
                            .seconds_left = 450,
                            .time_budget_s = 600,
                            .reused = false,
                            .action_error = {}};
}

EvalResult OkResult() {
  EvalResult r;
  r.task_id = "tst/scale";
  r.backend = "cpu";
  r.status = Status::kOk;
  r.stage = Stage::kDone;
  r.message = "correct and timed";
  r.seconds = 1.25;
  OutputCheck y;
  y.output = "y";
  y.elements = 1000;
  r.correctness = CorrectnessReport{3, {1, 2, 3}, {y}, true};
  TimingReport t;
  t.reference.median_ns = 150'000;
  t.candidate.median_ns = 100'000;
  t.speedup = 1.5;
  t.speedup_ci_low = 1.4;
  t.speedup_ci_high = 1.6;
  t.converged = true;
  t.rounds = 40;
  t.samples = {TimingSample{150'000, 100'000, 0, 0, 0, false, false}};
  r.timing = t;
  ProfileReport p;
  p.achieved_gflops = 20;
  p.achieved_gbps = 80;
  p.peak_gflops = 100;
  p.peak_gbps = 200;
  p.fraction_of_peak = 0.4;
  p.bound = "memory";
  p.arithmetic_intensity = 0.25;
  p.floor_ns = 40'000;
  p.remarks = {Remark{3, 5, true, "loop vectorized using 32 byte vectors"},
               Remark{3, 5, true, "loop vectorized using 16 byte vectors"},
               Remark{7, 9, false, "couldn't vectorize loop: complicated access pattern"}};
  r.profile = p;
  return r;
}

EvalResult CompileErrorResult() {
  EvalResult r;
  r.task_id = "tst/scale";
  r.backend = "cpu";
  r.status = Status::kCompileError;
  r.stage = Stage::kCompile;
  r.message = "1 error(s); first: kernel.cpp:4:16: 'foo' was not declared in this scope";
  r.diagnostics = {Diagnostic{"kernel.cpp", 2, 30, "warning", "unused parameter 'z'"},
                   Diagnostic{"kernel.cpp", 4, 16, "error", "'foo' was not declared in this scope"},
                   Diagnostic{"/usr/include/c++/12/cmath", 100, 1, "note", "declared here"}};
  return r;
}

EvalResult IncorrectResult() {
  EvalResult r;
  r.task_id = "tst/scale";
  r.backend = "cpu";
  r.status = Status::kIncorrect;
  r.stage = Stage::kCorrectness;
  r.message = "output y: 250 of 1000 elements differ from the reference";
  OutputCheck c;
  c.output = "y";
  c.elements = 1000;
  c.mismatches = 250;
  c.non_finite = 10;
  c.max_abs_error = 0.25;
  c.max_rel_error = 0.5;
  c.first_mismatch = 3 * 50 + 17;
  c.first_mismatch_index = {3, 17};
  c.expected = 0.5;
  c.actual = 0.25;
  r.correctness = CorrectnessReport{1, {7}, {c}, false};
  return r;
}

std::vector<Status> AllStatuses() {
  std::vector<Status> all;
  for (int i = 0; StatusName(static_cast<Status>(i)) != "?"; ++i) all.push_back(static_cast<Status>(i));
  return all;
}

double Feature(const protocol::Observation& obs, const std::string& name) {
  const std::vector<std::string>& names = FeatureNames();
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << "no feature " << name;
  if (it == names.end()) return std::numeric_limits<double>::quiet_NaN();
  return obs.features.at(static_cast<std::size_t>(it - names.begin()));
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Observation, StructuredFieldsOfAnOkResult) {
  const EvalResult r = OkResult();
  const protocol::Observation obs = BuildObservation(r, Context());
  EXPECT_EQ(obs.step, 3);
  EXPECT_EQ(obs.status, "ok");
  EXPECT_EQ(obs.stage, "done");
  EXPECT_EQ(obs.message, "correct and timed");
  EXPECT_TRUE(obs.action_error.empty());
  EXPECT_FALSE(obs.reused);
  EXPECT_DOUBLE_EQ(obs.speedup, 1.5);
  EXPECT_DOUBLE_EQ(obs.speedup_ci_low, 1.4);
  EXPECT_DOUBLE_EQ(obs.speedup_ci_high, 1.6);
  EXPECT_DOUBLE_EQ(obs.best_speedup, 1.5);
  EXPECT_EQ(obs.steps_left, 17);
  EXPECT_DOUBLE_EQ(obs.seconds_left, 450);
  EXPECT_EQ(obs.source, kSource);
  EXPECT_EQ(obs.report, ResultToJson(r, /*include_samples=*/false));
  EXPECT_FALSE(obs.report["timing"].contains("samples"));
}

TEST(Observation, SameInputsGiveTheSameTextAndFeatures) {
  for (const EvalResult& r : {OkResult(), CompileErrorResult(), IncorrectResult()}) {
    SCOPED_TRACE(StatusName(r.status));
    const protocol::Observation a = BuildObservation(r, Context());
    const protocol::Observation b = BuildObservation(r, Context());
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.features, b.features);
    EXPECT_FALSE(a.text.empty());
  }
}

TEST(Observation, TextHasNoAbsolutePathsSoRunsCompareEqual) {
  // Two runs that differ only in a work folder's random name read the same.
  EvalResult a = OkResult(), b = OkResult();
  a.status = b.status = Status::kCrashed;
  a.message = "kernel crashed: signal 11 in /tmp/kernelgym-eval-1234-99/kernel.so";
  b.message = "kernel crashed: signal 11 in /tmp/kernelgym-eval-5678-42/kernel.so";
  a.details = {"stderr: (/var/cache/kernelgym/ab12/harness.log) first line"};
  b.details = {"stderr: (/var/cache/kernelgym/cd34/harness.log) first line"};
  const protocol::Observation oa = BuildObservation(a, Context());
  const protocol::Observation ob = BuildObservation(b, Context());
  EXPECT_EQ(oa.text, ob.text);
  EXPECT_TRUE(Contains(oa.text, "signal 11 in kernel.so")) << oa.text;
  EXPECT_TRUE(Contains(oa.text, "(harness.log) first line")) << oa.text;
  EXPECT_FALSE(Contains(oa.text, "/tmp")) << oa.text;
  // The structured message stays as the runner wrote it.
  EXPECT_EQ(oa.message, a.message);
}

TEST(Observation, HeaderNamesTaskStepAndBudget) {
  const protocol::Observation obs = BuildObservation(OkResult(), Context());
  EXPECT_EQ(obs.text.substr(0, obs.text.find('\n')), "## tst/scale | step 3 | 17/20 steps left | 450.0/600.0 s left")
      << obs.text;
  EXPECT_TRUE(Contains(obs.text, "status: ok (stage done): correct and timed")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "best speedup so far: 1.500x")) << obs.text;
}

TEST(Observation, TextGivesTheSpeedupWithItsInterval) {
  const protocol::Observation obs = BuildObservation(OkResult(), Context());
  EXPECT_TRUE(Contains(obs.text,
                       "timing: speedup 1.500x (95% CI 1.400-1.600), median candidate 100.0 us vs reference 150.0 us, "
                       "40 rounds\n"))
      << obs.text;
  EXPECT_TRUE(Contains(obs.text, "correctness: 3 trials, deterministic, all outputs match")) << obs.text;
  EXPECT_TRUE(Contains(obs.text,
                       "roofline: memory-bound, 40.0% of that roof; 20.0 GFLOP/s (peak 100.0), 80.0 GB/s "
                       "(peak 200.0), intensity 0.25 flop/B"))
      << obs.text;
  // Line 3 vectorized (reported twice, once per vector size), line 7 not.
  EXPECT_TRUE(Contains(obs.text,
                       "vectorization: vectorized loops at line 3; not vectorized:\n"
                       "- line 7: couldn't vectorize loop: complicated access pattern\n"))
      << obs.text;
  EXPECT_NEAR(Feature(obs, "log_speedup"), std::log(1.5), 1e-12);
  EXPECT_NEAR(Feature(obs, "log_speedup_ci_low"), std::log(1.4), 1e-12);
  EXPECT_NEAR(Feature(obs, "log_speedup_ci_high"), std::log(1.6), 1e-12);
  EXPECT_NEAR(Feature(obs, "log_best_speedup"), std::log(1.5), 1e-12);
  EXPECT_NEAR(Feature(obs, "fraction_of_peak"), 0.4, 1e-12);
  EXPECT_EQ(Feature(obs, "memory_bound"), 1);
  EXPECT_NEAR(Feature(obs, "log1p_vectorized_loops"), std::log1p(1.0), 1e-12);
  EXPECT_NEAR(Feature(obs, "log1p_not_vectorized_loops"), std::log1p(1.0), 1e-12);
  EXPECT_NEAR(Feature(obs, "log10_arithmetic_intensity"), std::log10(0.25), 1e-12);
  EXPECT_NEAR(Feature(obs, "log10_task_flops"), std::log10(2e6), 1e-12);
  EXPECT_NEAR(Feature(obs, "log10_task_bytes"), std::log10(8e6), 1e-12);
  EXPECT_NEAR(Feature(obs, "steps_left_fraction"), 17.0 / 20, 1e-12);
  EXPECT_NEAR(Feature(obs, "seconds_left_fraction"), 450.0 / 600, 1e-12);
  EXPECT_NEAR(Feature(obs, "log1p_eval_seconds"), std::log1p(1.25), 1e-12);
}

// A pallas result off a TPU with a trusted compiler estimate: the text says so, with the static
// profile, and the structured speedup and the features stay the measured ones (0 here).
TEST(Observation, ATpuEstimateIsLabelledAndNeverTheMeasuredSpeedup) {
  EvalResult r;
  r.task_id = "tst/scale";
  r.backend = "pallas";
  r.status = Status::kOk;
  r.stage = Stage::kCorrectness;
  r.timing_representative = false;
  r.timing_clock = std::string(kTpuEstimateClock);
  r.estimate = SpeedEstimate{"llo_schedule", 40, 70, true, true, 1.75, true, {}};
  r.tpu_profile = {{"scale_kernel", 16, 120, 1920, {{"vpu", 0.5}, {"load_store", 0.25}}, 0}};
  ObservationContext context = Context();
  context.best_speedup = 0;
  context.best_estimated_speedup = 1.75;
  const protocol::Observation obs = BuildObservation(r, context);
  EXPECT_NE(obs.text.find("speed: estimated 1.750x"), std::string::npos) << obs.text;
  EXPECT_NE(obs.text.find("not a measurement"), std::string::npos) << obs.text;
  EXPECT_NE(obs.text.find("tpu kernel scale_kernel: 16 grid steps x 120 bundles"), std::string::npos) << obs.text;
  EXPECT_NE(obs.text.find("best estimated speedup so far: 1.750x"), std::string::npos) << obs.text;
  EXPECT_EQ(obs.text.find("timing: not representative"), std::string::npos) << obs.text;
  EXPECT_EQ(obs.speedup, 0) << "an estimate is never the measured speedup";
  r.estimate->trusted = false;
  r.estimate->reasons = {"a loop with a dynamic trip count"};
  const protocol::Observation untrusted = BuildObservation(r, context);
  EXPECT_EQ(untrusted.text.find("speed: estimated"), std::string::npos) << untrusted.text;
  EXPECT_NE(untrusted.text.find("estimate not trusted: a loop with a dynamic trip count"), std::string::npos) << untrusted.text;
  EXPECT_NE(untrusted.text.find("no reward for speed"), std::string::npos) << untrusted.text;
}

TEST(Observation, TextQuotesTheOffendingLineOfACompileError) {
  const protocol::Observation obs = BuildObservation(CompileErrorResult(), Context());
  EXPECT_EQ(obs.status, "compile_error");
  EXPECT_EQ(obs.stage, "compile");
  EXPECT_EQ(obs.speedup, 0);
  EXPECT_TRUE(Contains(obs.text, "diagnostics: 1 error, 1 warning\n")) << obs.text;
  EXPECT_TRUE(Contains(obs.text,
                       "- error at 4:16: 'foo' was not declared in this scope\n"
                       "      4 |         y[i] = foo(x[i]);\n"))
      << obs.text;
  // Errors come first, whatever order the compiler used; a header's note keeps only its file name.
  EXPECT_LT(obs.text.find("- error at"), obs.text.find("- warning at")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "- note at cmath:100:1: declared here\n")) << obs.text;
  EXPECT_FALSE(Contains(obs.text, "/usr/include")) << obs.text;
  EXPECT_NEAR(Feature(obs, "log1p_compile_errors"), std::log1p(1.0), 1e-12);
  EXPECT_NEAR(Feature(obs, "log1p_compile_warnings"), std::log1p(1.0), 1e-12);
  EXPECT_EQ(Feature(obs, "log_speedup"), 0);
}

TEST(Observation, TheCandidatesTextCannotMoveTheCursorOrBreakUtf8) {
  // What a candidate's process wrote (a stderr head) and its #error text, with terminal escapes,
  // a carriage return, invalid UTF-8 and a fake status line; and a source line whose 160-byte cut
  // falls inside a multi-byte character.
  EvalResult r = CompileErrorResult();
  r.status = Status::kCrashed;
  r.stage = Stage::kCorrectness;
  r.message = "killed by SIGABRT\x1b[2K\rstatus: ok";
  r.diagnostics.clear();
  r.details = {"harness stderr: \x1b[1A\x1b[2Kstatus: ok \xFF\xFE\xE2\x80\xAE\nspeedup 10.000x"};
  const protocol::Observation crashed = BuildObservation(r, Context());
  EXPECT_TRUE(Contains(crashed.text, "status: crashed (stage correctness): killed by SIGABRT\\x1b[2K\\x0dstatus: ok\n"))
      << crashed.text;
  EXPECT_TRUE(Contains(crashed.text, "> harness stderr: \\x1b[1A\\x1b[2Kstatus: ok \xEF\xBF\xBD\xEF\xBF\xBD\\u202e\n"))
      << crashed.text;
  EXPECT_FALSE(Contains(crashed.text, "10.000x")) << "one line per detail";

  const std::string long_line = "        y[i] = foo(x[i]); // " + std::string(127, 'a') + "\xC3\xA9\xC3\xA9 \x1b[2K";
  const std::string source = std::string(kSource).replace(std::string(kSource).find("        y[i] = foo(x[i]);"),
                                                          std::string("        y[i] = foo(x[i]);").size(), long_line);
  EvalResult compile = CompileErrorResult();
  compile.diagnostics[1].message = "#error \x1b[2Kok \xED\xA0\x80";
  const protocol::Observation obs = BuildObservation(compile, Context(source));
  EXPECT_TRUE(Contains(obs.text, "- error at 4:16: #error \\x1b[2Kok \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\n"))
      << obs.text;
  // The quoted line is cut before the 'é' that straddles the 157-byte cut, never inside it.
  EXPECT_TRUE(Contains(obs.text, "      4 | " + long_line.substr(0, 156) + "...\n")) << obs.text;
  for (const protocol::Observation* o : {&crashed, &obs}) {
    for (const char c : o->text) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << int(c);
    EXPECT_NO_THROW((void)nlohmann::json(o->text).dump()) << "the text is valid UTF-8";
  }
}

// The part of a message a model needs is often late in it: a Mosaic block-shape error names the
// shapes after a long preamble, and on later lines. The whole message is shown, wrapped; and a
// pallas diagnostic (on candidate.py) quotes its source line as a cpu one does.
TEST(Observation, ADiagnosticsWholeMessageIsShownWrappedAndPallasLinesAreQuoted) {
  EvalResult r = CompileErrorResult();
  const std::string preamble = "[lower] ValueError: The Pallas TPU lowering currently requires that the last two "
                               "dimensions of your block shape are divisible by 8 and 128 respectively, or be equal "
                               "to the respective dimensions of the overall array.";
  r.diagnostics = {Diagnostic{"candidate.py", 4, 0, "error",
                              preamble + "\nGot block_shape=(7, 100) for an array of shape (1024, 1024) (operand 0)."}};
  const protocol::Observation obs = BuildObservation(r, Context());
  EXPECT_TRUE(Contains(obs.text, "block_shape=(7, 100) for an array of shape (1024, 1024)")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "respectively, or be equal")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "      4 |         y[i] = foo(x[i]);\n")) << obs.text;
  for (std::istringstream lines(obs.text); !lines.eof();) {
    std::string line;
    std::getline(lines, line);
    EXPECT_LE(line.size(), 160u) << "wrapped, not one long line: " << line;
  }
  // A flood is still bounded, and says how much was left out.
  r.diagnostics = {Diagnostic{"kernel.cpp", 4, 1, "error", std::string(50000, 'x')}};
  const protocol::Observation flood = BuildObservation(r, Context());
  EXPECT_LT(flood.text.size(), 5000u);
  EXPECT_TRUE(Contains(flood.text, "(48000 more bytes)")) << flood.text.substr(0, 300);
}

TEST(Observation, AtMostTenDiagnosticsAreListed) {
  EvalResult r = CompileErrorResult();
  r.diagnostics.clear();
  for (int i = 0; i < 15; ++i)
    r.diagnostics.push_back({"kernel.cpp", 4, i + 1, "error", "error number " + std::to_string(i)});
  const protocol::Observation obs = BuildObservation(r, Context());
  EXPECT_TRUE(Contains(obs.text, "error number 9\n")) << obs.text;
  EXPECT_FALSE(Contains(obs.text, "error number 10\n")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "- ... 5 more\n")) << obs.text;
}

TEST(Observation, TextGivesTheFirstMismatch) {
  const protocol::Observation obs = BuildObservation(IncorrectResult(), Context());
  EXPECT_EQ(obs.status, "incorrect");
  EXPECT_TRUE(Contains(obs.text, "correctness: 1 trial, NOT deterministic")) << obs.text;
  EXPECT_TRUE(Contains(obs.text, "1 of 1 outputs wrong")) << obs.text;
  EXPECT_TRUE(Contains(obs.text,
                       "- y: 250 of 1000 elements wrong (25.000%), 10 non-finite (NaN/Inf or poison left); max abs err "
                       "0.25, max rel err 0.5; first at [3, 17]: expected 0.5, got 0.25\n"))
      << obs.text;
  EXPECT_NEAR(Feature(obs, "mismatch_fraction"), 0.25, 1e-12);
  EXPECT_NEAR(Feature(obs, "non_finite_fraction"), 0.01, 1e-12);
  EXPECT_EQ(Feature(obs, "nondeterministic"), 1);
}

TEST(Observation, AnActionErrorIsAnInvalidActionObservation) {
  ObservationContext context = Context();
  context.action_error = "edit block 0 (search \"y[i] = bar\"): not found in the current source";
  const protocol::Observation obs = BuildObservation(OkResult(), context);  // the source that is still current
  EXPECT_EQ(obs.status, "invalid_action");
  EXPECT_EQ(obs.message, context.action_error);
  EXPECT_EQ(obs.action_error, context.action_error);
  EXPECT_EQ(obs.speedup, 0);  // speedup is for an ok status only
  EXPECT_TRUE(Contains(obs.text,
                       "invalid action (not applied; the source is unchanged): edit block 0 (search "
                       "\"y[i] = bar\"): not found in the current source\n"))
      << obs.text;
  EXPECT_TRUE(Contains(obs.text, "status of the current source: ok")) << obs.text;
  EXPECT_EQ(Feature(obs, "status_invalid_action"), 1);
  EXPECT_EQ(Feature(obs, "status_ok"), 0);
  EXPECT_EQ(Feature(obs, "action_error"), 1);
  EXPECT_EQ(Feature(obs, "log_speedup"), 0);
}

TEST(Observation, AReusedEvaluationSaysSo) {
  ObservationContext context = Context();
  context.reused = true;
  const protocol::Observation obs = BuildObservation(OkResult(), context);
  EXPECT_TRUE(obs.reused);
  EXPECT_TRUE(Contains(obs.text, "(unchanged source: previous evaluation re-used)\n")) << obs.text;
  EXPECT_EQ(Feature(obs, "reused"), 1);
  EXPECT_FALSE(Contains(BuildObservation(OkResult(), Context()).text, "re-used"));
}

TEST(Observation, NoBestSpeedupYet) {
  ObservationContext context = Context();
  context.best_speedup = 0;
  const protocol::Observation obs = BuildObservation(CompileErrorResult(), context);
  EXPECT_TRUE(Contains(obs.text, "best speedup so far: none yet\n")) << obs.text;
  EXPECT_EQ(Feature(obs, "log_best_speedup"), 0);
}

TEST(ObservationFeatures, NamesAreUniqueAndCoverEveryStatusAndStage) {
  const std::vector<std::string>& names = FeatureNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (Status s : AllStatuses())
    EXPECT_NE(std::find(names.begin(), names.end(), "status_" + std::string(StatusName(s))), names.end())
        << StatusName(s);
  EXPECT_NE(std::find(names.begin(), names.end(), "status_invalid_action"), names.end());
  for (int i = 0; StageName(static_cast<Stage>(i)) != "?"; ++i)
    EXPECT_NE(std::find(names.begin(), names.end(), "stage_" + std::string(StageName(static_cast<Stage>(i)))),
              names.end());
  EXPECT_EQ(&FeatureNames(), &names);  // one stable table
}

// The layout is part of the protocol (hello's feature_names; learned policies are trained on it):
// changing it must be a decision, so it is spelled out here.
TEST(ObservationFeatures, TheLayoutIsStable) {
  const std::vector<std::string> expected{"status_ok",
                                          "status_rejected",
                                          "status_compile_error",
                                          "status_incorrect",
                                          "status_crashed",
                                          "status_timeout",
                                          "status_sandbox_violation",
                                          "status_implausible",
                                          "status_internal_error",
                                          "status_invalid_action",
                                          "stage_static_check",
                                          "stage_compile",
                                          "stage_symbol_check",
                                          "stage_correctness",
                                          "stage_timing",
                                          "stage_profile",
                                          "stage_done",
                                          "log_speedup",
                                          "log_speedup_ci_low",
                                          "log_speedup_ci_high",
                                          "log_best_speedup",
                                          "reused",
                                          "action_error",
                                          "log1p_compile_errors",
                                          "log1p_compile_warnings",
                                          "mismatch_fraction",
                                          "non_finite_fraction",
                                          "nondeterministic",
                                          "fraction_of_peak",
                                          "memory_bound",
                                          "log10_arithmetic_intensity",
                                          "log10_task_flops",
                                          "log10_task_bytes",
                                          "log1p_vectorized_loops",
                                          "log1p_not_vectorized_loops",
                                          "steps_left_fraction",
                                          "seconds_left_fraction",
                                          "log1p_eval_seconds"};
  EXPECT_EQ(FeatureNames(), expected);
}

TEST(ObservationFeatures, FixedLengthWithOneStatusAndOneStageForEveryStatus) {
  ASSERT_GE(AllStatuses().size(), 9u);  // kOk .. kInternalError at least
  for (Status s : AllStatuses()) {
    SCOPED_TRACE(StatusName(s));
    EvalResult r = OkResult();
    r.status = s;
    r.stage = s == Status::kCompileError ? Stage::kCompile : Stage::kDone;
    const protocol::Observation obs = BuildObservation(r, Context());
    ASSERT_EQ(obs.features.size(), FeatureNames().size());
    EXPECT_EQ(obs.status, StatusName(s));
    double status_sum = 0, stage_sum = 0;
    for (std::size_t i = 0; i < obs.features.size(); ++i) {
      if (FeatureNames()[i].rfind("status_", 0) == 0) status_sum += obs.features[i];
      if (FeatureNames()[i].rfind("stage_", 0) == 0) stage_sum += obs.features[i];
    }
    EXPECT_EQ(status_sum, 1);
    EXPECT_EQ(stage_sum, 1);
    EXPECT_EQ(Feature(obs, "status_" + std::string(StatusName(s))), 1);
    EXPECT_EQ(Feature(obs, std::string("stage_") + (s == Status::kCompileError ? "compile" : "done")), 1);
    // Only an ok evaluation has a speedup.
    EXPECT_EQ(Feature(obs, "log_speedup") != 0, s == Status::kOk);
  }
  ObservationContext invalid = Context();
  invalid.action_error = "patch: not a unified diff (no @@ hunk header)";
  EXPECT_EQ(BuildObservation(CompileErrorResult(), invalid).features.size(), FeatureNames().size());
  EXPECT_EQ(BuildObservation(EvalResult{}, Context()).features.size(), FeatureNames().size());
}

TEST(ObservationFeatures, AlwaysFiniteEvenWhenTheResultIsNot) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  EvalResult r = OkResult();
  r.seconds = kInf;
  r.timing->speedup = kInf;
  r.timing->speedup_ci_low = kNaN;
  r.timing->speedup_ci_high = -kInf;
  r.timing->candidate.median_ns = kNaN;
  r.profile->fraction_of_peak = kNaN;
  r.profile->achieved_gflops = kInf;
  r.correctness->checks[0].elements = 0;  // a fraction with nothing to divide by
  r.correctness->checks[0].mismatches = 5;
  r.correctness->checks[0].max_abs_error = kNaN;
  ObservationContext context = Context();
  context.best_speedup = kInf;
  context.seconds_left = kNaN;
  context.time_budget_s = 0;
  context.max_steps = 0;
  Task weird = TestTask();
  weird.flops = 0;  // log10(0 flops / bytes) would be -inf
  weird.bytes = kInf;
  const ObservationContext weird_context{.task = weird,
                                         .source = context.source,
                                         .step = 1,
                                         .best_speedup = kNaN,
                                         .steps_left = -3,
                                         .max_steps = 10,
                                         .seconds_left = -kInf,
                                         .time_budget_s = kNaN,
                                         .reused = false,
                                         .action_error = {}};
  for (const ObservationContext* c : std::vector<const ObservationContext*>{&context, &weird_context}) {
    const protocol::Observation obs = BuildObservation(r, *c);
    ASSERT_EQ(obs.features.size(), FeatureNames().size());
    for (std::size_t i = 0; i < obs.features.size(); ++i)
      EXPECT_TRUE(std::isfinite(obs.features[i])) << FeatureNames()[i] << " = " << obs.features[i];
    for (double v : {obs.speedup, obs.speedup_ci_low, obs.speedup_ci_high, obs.best_speedup, obs.seconds_left})
      EXPECT_TRUE(std::isfinite(v));
    // The text spells a non-finite number one way, not as the C library does.
    EXPECT_FALSE(Contains(obs.text, "nan")) << obs.text;
    EXPECT_FALSE(Contains(obs.text, "inf")) << obs.text;
    EXPECT_TRUE(Contains(obs.text, "n/a")) << obs.text;
  }
  const protocol::Observation obs = BuildObservation(r, context);
  EXPECT_EQ(Feature(obs, "mismatch_fraction"), 0);
  EXPECT_EQ(Feature(obs, "fraction_of_peak"), 0);
  EXPECT_EQ(Feature(obs, "steps_left_fraction"), 0);
  EXPECT_EQ(Feature(obs, "seconds_left_fraction"), 0);
  EXPECT_EQ(Feature(obs, "log_speedup"), 0);  // nothing to learn from an infinite speedup

  r.timing->speedup = 1e300;  // finite but absurd: clamped
  r.timing->speedup_ci_low = 1e-300;
  const protocol::Observation clamped = BuildObservation(r, Context());
  EXPECT_EQ(Feature(clamped, "log_speedup"), 20);
  EXPECT_EQ(Feature(clamped, "log_speedup_ci_low"), -20);
}

}  // namespace
}  // namespace kernelgym
