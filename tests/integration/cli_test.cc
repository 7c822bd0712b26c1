// The `kernelgym` command line as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/subprocess.h"
#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

ProcessResult Cli(const std::vector<std::string>& args) {
  SpawnOptions options;
  options.argv = {KERNELGYM_CLI};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e; ++e) options.env.push_back(*e);
  return RunProcess(options, 120);
}

std::string TempSource(const std::string& name, const std::string& text) {
  const auto path = TestTempDir() / (name + ".cpp");
  std::ofstream(path) << text;
  return path.string();
}

TEST(CliTest, TasksJsonListsEveryTask) {
  const ProcessResult r = Cli({"tasks", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto tasks = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(tasks.size(), Tasks().All().size());
  for (const auto& t : tasks) EXPECT_FALSE(t.at("signature").get<std::string>().empty());
}

TEST(CliTest, TasksFilterBySuite) {
  const ProcessResult cpu = Cli({"tasks", "--suite", "cpu", "--json"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.stderr_text;
  const auto tasks = nlohmann::json::parse(cpu.stdout_text);
  EXPECT_EQ(tasks.size(), Tasks().InSuite("cpu").size());
  for (const auto& t : tasks) EXPECT_EQ(t.at("id").get<std::string>().rfind("cpu/", 0), 0u);
  const ProcessResult all = Cli({"tasks", "--suite", "all", "--json"});
  ASSERT_EQ(all.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(all.stdout_text).size(), Tasks().All().size());
  const ProcessResult unknown = Cli({"tasks", "--suite", "no_such_suite"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.stderr_text.find("suites: "), std::string::npos) << unknown.stderr_text;
}

TEST(CliTest, TasksShowSizesShapesAndTheRecordedFigures) {
  // A suites root of its own: one bundled task copied, with a measured.json beside it.
  const auto root = TestTempDir() / "suites_with_figures";
  std::filesystem::create_directories(root / "cpu");
  std::filesystem::copy(SourceDir() / "datasets/suites/cpu/softmax_rows", root / "cpu/softmax_rows",
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  std::ofstream(root / "measured.json") << R"({"machine": "test box", "date": "2026-11-30", "command": "bench",
      "tasks": {"cpu/softmax_rows": {"reference_ms": 0.72, "starter_ms": 2.45, "starter_speedup": 0.291,
                                     "best_knob_speedup": 2.1, "best_knobs": "EXP=exp_poly SIMD=1",
                                     "knob_combinations": 8}}})";
  const ProcessResult text = Cli({"--suites", root.string(), "tasks"});
  ASSERT_EQ(text.exit_code, 0) << text.stderr_text;
  EXPECT_NE(text.stdout_text.find("R=512 C=1024"), std::string::npos) << text.stdout_text;
  EXPECT_NE(text.stdout_text.find("0.72 ms"), std::string::npos) << text.stdout_text;
  EXPECT_NE(text.stdout_text.find("0.291x"), std::string::npos) << text.stdout_text;
  EXPECT_NE(text.stdout_text.find("2.10x"), std::string::npos) << text.stdout_text;
  EXPECT_NE(text.stdout_text.find("test box"), std::string::npos) << text.stdout_text;

  const auto j = nlohmann::json::parse(Cli({"--suites", root.string(), "tasks", "--json"}).stdout_text);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].at("sizes"), nlohmann::json::parse(R"([{"name": "R", "value": 512}, {"name": "C", "value": 1024}])"));
  EXPECT_EQ(j[0].at("inputs")[0].at("shape"), nlohmann::json({512, 1024}));
  EXPECT_EQ(j[0].at("measured").at("best_knobs"), "EXP=exp_poly SIMD=1");

  std::ofstream(root / "measured.json") << R"({"tasks": {"cpu/softmax_rows": {"reference_ms": "fast"}}})";
  const ProcessResult malformed = Cli({"--suites", root.string(), "tasks"});
  EXPECT_EQ(malformed.exit_code, 0) << "the listing stands without the figures";
  EXPECT_NE(malformed.stderr_text.find("reference_ms"), std::string::npos) << malformed.stderr_text;
}

TEST(CliTest, TasksMeasureEvaluatesTheStartersHere) {
  const auto root = TestTempDir() / "suites_to_measure";
  std::filesystem::create_directories(root / "cpu");
  std::filesystem::copy(SourceDir() / "datasets/suites/cpu/silu_mul", root / "cpu/silu_mul",
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  const ProcessResult r = Cli({"--suites", root.string(), "tasks", "--measure", "--timing-budget-s", "0.2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto j = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_GT(j[0].at("measured").at("reference_ms").get<double>(), 0);
  EXPECT_GT(j[0].at("measured").at("starter_speedup").get<double>(), 0);
}

TEST(CliTest, EvalKnobsBuildsTheTemplate) {
  const ProcessResult r = Cli({"eval", "--task", "cpu/softmax_rows", "--knobs", "SIMD=1,EXP=exp_poly", "--json",
                               "--no-timing"});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(r.stdout_text).at("status"), "ok");
  const ProcessResult defaults = Cli({"eval", "--task", "cpu/softmax_rows", "--knobs", "", "--json", "--no-timing"});
  EXPECT_EQ(defaults.exit_code, 0) << defaults.stderr_text;

  const ProcessResult outside = Cli({"eval", "--task", "cpu/softmax_rows", "--knobs", "SIMD=7"});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.stderr_text.find("SIMD"), std::string::npos) << outside.stderr_text;
  const ProcessResult malformed = Cli({"eval", "--task", "cpu/softmax_rows", "--knobs", "SIMD"});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.stderr_text.find("NAME=value"), std::string::npos) << malformed.stderr_text;
  // Neither a source nor knobs: the task's starter for the backend.
  const ProcessResult neither = Cli({"eval", "--task", "cpu/softmax_rows", "--json", "--no-timing"});
  EXPECT_EQ(neither.exit_code, 0) << neither.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(neither.stdout_text).at("status"), "ok");
}

TEST(CliTest, EvalJsonReportsStatusAndSpeedup) {
  const auto starter = (SourceDir() / "datasets/suites/cpu/softmax_rows/starter.cpp").string();
  const ProcessResult r = Cli({"eval", "--task", "cpu/softmax_rows", "--source", starter, "--json", "--timing-budget-s", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  const auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j.at("status"), "ok");
  EXPECT_GT(j.at("speedup").get<double>(), 0);
  EXPECT_TRUE(j.at("timing").contains("speedup_ci95"));
  EXPECT_TRUE(j.at("profile").contains("bound"));
  EXPECT_FALSE(j.at("timing").contains("samples")) << "raw samples only with --samples";
}

TEST(CliTest, CompileErrorsPointAtTheSourceLine) {
  const std::string path = TempSource("broken", "#include <cstdint>\nextern \"C\" void kernel(const float* x, float* y, int64_t R, int64_t C) {\n  y[0] = undeclared;\n}\n");
  const ProcessResult json_run = Cli({"eval", "--task", "cpu/softmax_rows", "--source", path, "--json"});
  EXPECT_EQ(json_run.exit_code, 1);
  const auto j = nlohmann::json::parse(json_run.stdout_text);
  EXPECT_EQ(j.at("status"), "compile_error");
  ASSERT_FALSE(j.at("diagnostics").empty());
  EXPECT_EQ(j["diagnostics"][0].at("line"), 3);
  EXPECT_NE(j["diagnostics"][0].at("message").get<std::string>().find("undeclared"), std::string::npos);

  const ProcessResult text_run = Cli({"eval", "--task", "cpu/softmax_rows", "--source", path});
  EXPECT_NE(text_run.stdout_text.find("3 |   y[0] = undeclared;"), std::string::npos) << text_run.stdout_text;
}

TEST(CliTest, WrongSignatureIsACompileError) {
  const std::string path = TempSource("signature", "#include <cstdint>\nextern \"C\" void kernel(const float* x, float* y, int R, int C) {}\n");
  const ProcessResult r = Cli({"eval", "--task", "cpu/softmax_rows", "--source", path, "--json"});
  const auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j.at("status"), "compile_error");
  EXPECT_NE(j.at("message").get<std::string>().find("kernel"), std::string::npos) << j.dump();
}

TEST(CliTest, WithoutNamespacesItStillEvaluatesAndSaysWhatWasOff) {
  setenv("KERNELGYM_SANDBOX", "none", 1);
  const auto starter = (SourceDir() / "datasets/suites/cpu/softmax_rows/starter.cpp").string();
  const ProcessResult ok_run = Cli({"eval", "--task", "cpu/softmax_rows", "--source", starter, "--json", "--timing-budget-s", "0.2"});
  const auto socket_case = (SourceDir() / "tests/adversarial/socket_raw_syscall/kernel.cpp").string();
  const ProcessResult attack = Cli({"eval", "--task", "cpu/silu_mul", "--source", socket_case, "--json"});
  unsetenv("KERNELGYM_SANDBOX");
  const auto j = nlohmann::json::parse(ok_run.stdout_text);
  EXPECT_EQ(j.at("status"), "ok") << j.dump();
  EXPECT_FALSE(j.at("protections").at("network_namespace").get<bool>());
  EXPECT_FALSE(j.at("protections").at("mount_namespace_readonly_view").get<bool>());
  EXPECT_TRUE(j.at("protections").at("seccomp").get<bool>());
  // seccomp does not depend on namespaces
  EXPECT_EQ(nlohmann::json::parse(attack.stdout_text).at("status"), "sandbox_violation");
}

// The adversarial cases whose bytes are not UTF-8 or imitate the report (tests/adversarial/).
const char* const kByteCases[] = {"output_invalid_utf8_constructor", "output_invalid_utf8_kernel",
                                  "error_directive_invalid_utf8",    "warning_directive_invalid_utf8",
                                  "include_name_invalid_utf8",       "symbol_name_invalid_utf8",
                                  "error_directive_forges_verdict",  "output_forges_verdict"};

TEST(CliTest, EvalJsonSurvivesBytesThatAreNotUtf8) {
  // These aborted the CLI (nlohmann's dump() threw type_error 316 on the first invalid byte).
  for (const char* name : kByteCases) {
    const auto dir = SourceDir() / "tests/adversarial" / name;
    const auto expected = nlohmann::json::parse(ReadText(dir / "expected.json"));
    const ProcessResult r = Cli({"eval", "--task", expected.at("task").get<std::string>(), "--source",
                                 (dir / "kernel.cpp").string(), "--json", "--no-timing"});
    EXPECT_EQ(r.signal, 0) << name << ": " << r.stderr_text;
    const bool ok = expected.at("status") == "ok";
    EXPECT_EQ(r.exit_code, ok ? 0 : 1) << name << ": " << r.stderr_text;
    nlohmann::json j;
    // nlohmann's parser is strict: this also proves the output is valid UTF-8.
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.stdout_text)) << name << ": not valid JSON:\n" << r.stdout_text;
    EXPECT_EQ(j.at("status"), expected.at("status")) << name << ": " << j.dump(2);
  }
}

TEST(CliTest, ThePlainReportQuotesACandidatesFakeVerdictOnlyBehindTheFence) {
  for (const char* name : {"output_forges_verdict", "error_directive_forges_verdict"}) {
    const auto dir = SourceDir() / "tests/adversarial" / name;
    const auto expected = nlohmann::json::parse(ReadText(dir / "expected.json"));
    const ProcessResult r =
        Cli({"eval", "--task", "cpu/silu_mul", "--source", (dir / "kernel.cpp").string(), "--no-timing"});
    EXPECT_EQ(r.exit_code, 1) << name << ": " << r.stderr_text;
    const std::string& out = r.stdout_text;
    for (const char c : out)
      ASSERT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << name << ": control byte " << int(c) << " in:\n"
                                                                      << out;
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    ASSERT_GE(lines.size(), 3u) << out;
    const std::string verdict =
        expected.at("status").get<std::string>() + " (stage " + expected.at("stage").get<std::string>() + ")";
    EXPECT_EQ(lines.front(), "cpu/silu_mul [cpu]: " + verdict) << out;
    EXPECT_EQ(lines.back(), "verdict: " + verdict) << out;
    // Every line that carries the fake verdict is quoted ("    | ") or follows a label; none
    // starts with it, at any indentation.
    for (const std::string& line : lines) {
      const std::string content = line.substr(std::min(line.find_first_not_of(' '), line.size()));
      for (const char* fake : {"status: ok", "cpu/silu_mul [cpu]: ok", "speedup", "verdict: ok", "{\"status\""})
        EXPECT_NE(content.rfind(fake, 0), 0u) << name << ": a line starts with the fake '" << fake << "':\n" << out;
    }
    if (std::string(name) == "output_forges_verdict") {
      // The kernel's stderr is shown, quoted, its escapes visible.
      EXPECT_NE(out.find("    | status: ok\n"), std::string::npos) << out;
      EXPECT_NE(out.find("    | verdict: incorrect\\x0dverdict: ok"), std::string::npos) << out;
      EXPECT_NE(out.find("\\x1b[1A\\x1b[2K"), std::string::npos) << out;
    } else {
      EXPECT_NE(out.find("#error \\x1b[1A\\x1b[2Kcpu/silu_mul [cpu]: ok (stage timing) \\x08\\x08"), std::string::npos)
          << out;
    }
  }
}

TEST(CliTest, BadArgumentsGiveClearErrors) {
  const ProcessResult unknown = Cli({"eval", "--task", "cpu/no_such_task", "--source", "/dev/null"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.stderr_text.find("unknown task"), std::string::npos) << unknown.stderr_text;
  const ProcessResult missing = Cli({"eval", "--task", "cpu/softmax_rows", "--source", "/nonexistent/k.cpp"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.stderr_text.find("cannot read"), std::string::npos) << missing.stderr_text;
}

}  // namespace
}  // namespace kernelgym::testing
