// `kernelgym agent` end to end: the real command against a real server and runner, its model a
// scripted chat-completions endpoint (policies/agent/scripted/softmax_rows: a plan, a broken
// edit, a debugger fix, a TUNE decision, a knob search, a reply without code, a cut reply, STOP,
// and HTTP 429/503 on the way). Kernels are compiled and timed for real.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>

#include "core/subprocess.h"
#include "datasets/trajectory/reader.h"
#include "policies/llm/scripted_server.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

const std::filesystem::path kScript =
    std::filesystem::path(KERNELGYM_SOURCE_DIR) / "policies/agent/scripted/softmax_rows/script.json";

ProcessResult RunAgent(const std::vector<std::string>& flags, double timeout_s = 300) {
  SpawnOptions options;
  options.argv = {KERNELGYM_CLI, "agent", "--task", "cpu/softmax_rows", "--model", "scripted"};
  options.argv.insert(options.argv.end(), flags.begin(), flags.end());
  for (char** e = environ; *e; ++e) options.env.push_back(*e);
  options.env.push_back("NO_PROXY=127.0.0.1");
  return RunProcess(options, timeout_s);
}

TEST(AgentTest, AWholeEpisodeImprovesTheKernelAgainstTheScriptedEndpoint) {
  ServerProcess server({"--local-runners", "1"});
  std::unique_ptr<llm::ScriptedServer> model = llm::ScriptedServer::FromFile(kScript);
  model->Start();
  const std::filesystem::path report_file = server.dir() / "report.json", transcript = server.dir() / "transcript.jsonl";
  const ProcessResult run = RunAgent({"--endpoint", model->base_url(), "--connect", server.clients(), "--report",
                                      report_file.string(), "--transcript", transcript.string(), "--seed", "7",
                                      "--llm-timeout-s", "30"});
  ASSERT_TRUE(run.ok()) << run.Describe() << "\n" << run.stderr_text << run.stdout_text;
  const nlohmann::json report = nlohmann::json::parse(ReadText(report_file));

  // The outcome: the debugger repaired the broken edit, the tuner's knob search found a kernel
  // much faster than the starter, and the best one was submitted and passed the final check.
  EXPECT_EQ(report["submit_status"], "ok");
  EXPECT_TRUE(report["submitted"].get<bool>());
  EXPECT_GT(report["best_speedup"].get<double>(), 1.5 * report["starter_speedup"].get<double>()) << report.dump(2);
  EXPECT_EQ(report["debug_steps"], 1);
  EXPECT_EQ(report["tuner_steps"], 2);
  EXPECT_NE(report["stop_reason"].get<std::string>().find("analyst expects no more gain"), std::string::npos);
  // The model's failures were absorbed, and counted: the 429 and the 503 were retried, the reply
  // without code and the cut reply were unusable.
  EXPECT_EQ(report["chat"]["calls"], 9);
  EXPECT_EQ(report["chat"]["retries"], 2);
  EXPECT_EQ(report["chat"]["truncated"], 1);
  EXPECT_EQ(report["asks"]["bad_replies"], 2);
  EXPECT_EQ(report["asks"]["failed_calls"], 0);
  EXPECT_GT(report["chat"]["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(model->requests().size(), 11u);  // 9 calls + 2 retries
  for (const llm::ScriptedRequest& r : model->requests()) EXPECT_EQ(r.body["model"], "scripted");

  // The debugger saw the compiler's message, and the planner of round 2 saw round 1's history.
  bool debugger_saw_error = false, planner_saw_history = false;
  for (const llm::ScriptedRequest& r : model->requests()) {
    const std::string user = r.body["messages"][1]["content"].get<std::string>();
    const std::string system = r.body["messages"][0]["content"].get<std::string>();
    if (system.find("You are a meticulous") != std::string::npos && user.find("'inv_sum' was not declared") != std::string::npos)
      debugger_saw_error = true;
    if (system.find("You are the planning engineer") != std::string::npos && user.find("round 1:") != std::string::npos)
      planner_saw_history = true;
  }
  EXPECT_TRUE(debugger_saw_error);
  EXPECT_TRUE(planner_saw_history);

  // Everything the model was sent and said is recorded with the episode's steps (env.step meta):
  // all 9 exchanges, each with its role, prompts and completion.
  ASSERT_EQ(server.Terminate(30), 0);
  TrajectoryReader reader(server.store());
  std::map<std::string, int> roles;
  int exchanges = 0;
  for (nlohmann::json record; reader.Next(record);) {
    if (record["kind"] != "transition" || !record.contains("meta")) continue;
    EXPECT_EQ(record["meta"]["policy"], "kernelgym-agent");
    for (const nlohmann::json& e : record["meta"].value("exchanges", nlohmann::json::array())) {
      ++exchanges;
      ++roles[e["role"].get<std::string>()];
      EXPECT_EQ(e["messages"][0]["role"], "system");
      EXPECT_TRUE(e["completion"].is_string());
    }
  }
  EXPECT_EQ(exchanges, 9);
  EXPECT_EQ(roles, (std::map<std::string, int>{{"debugger", 1}, {"implementer", 3}, {"planner", 2}, {"profiler", 2},
                                               {"tuner", 1}}));
  // ...and they export as chat examples for SFT: the 7 usable ones (the reply without code and
  // the cut reply are left out).
  const std::filesystem::path chat = server.dir() / "chat.jsonl";
  SpawnOptions export_command;
  export_command.argv = {KERNELGYM_CLI, "dataset", "export", "--store", server.store().string(), "--format", "chat",
                         "--out", chat.string()};
  const ProcessResult exported = RunProcess(export_command, 60);
  ASSERT_TRUE(exported.ok()) << exported.Describe() << exported.stderr_text;
  std::istringstream chat_lines(ReadText(chat));
  int examples = 0;
  for (std::string line; std::getline(chat_lines, line); ++examples) {
    const nlohmann::json example = nlohmann::json::parse(line);
    EXPECT_EQ(example["messages"].back()["role"], "assistant");
    EXPECT_EQ(example["task"], "cpu/softmax_rows");
  }
  EXPECT_EQ(examples, 7);

  // The transcript has every step.
  std::istringstream lines(ReadText(transcript));
  int steps = 0;
  for (std::string line; std::getline(lines, line);) steps += nlohmann::json::parse(line)["kind"] == "step";
  EXPECT_EQ(steps, report["steps"].get<int>());
}

// Endpoints that cannot be used stop the run at once, with the server's own reason and exit status
// 3 — never a run that re-asks every round, submits the starter and exits 0. A wrong URL, a
// missing key and nothing listening are caught by the first contact, before any server or env.
TEST(AgentTest, UnusableEndpointsStopAtOnceWithTheServersReason) {
  llm::ScriptedServer keyed(nlohmann::json{{"endpoint", {{"api_key", "sk-right"}}}, {"default", {{"content", "x"}}}});
  keyed.Start();
  const std::string without_v1 = keyed.base_url().substr(0, keyed.base_url().size() - 3);
  struct Case {
    std::string name, endpoint, expected;
  };
  for (const Case& c : {Case{"no /v1", without_v1, "HTTP 404"}, Case{"no key", keyed.base_url(), "Incorrect API key"},
                        Case{"nothing listens", "http://127.0.0.1:9/v1", "127.0.0.1:9"}}) {
    const auto start = std::chrono::steady_clock::now();
    const ProcessResult run = RunAgent({"--endpoint", c.endpoint}, 60);
    EXPECT_EQ(run.exit_code, 3) << c.name << ": " << run.Describe() << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(c.expected), std::string::npos) << c.name << ": " << run.stderr_text;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20) << c.name;
  }
  EXPECT_TRUE(keyed.requests().empty()) << "the first contact is GET /models; no chat call was made";

  // Every command that talks to a model makes the same first contact.
  const std::vector<std::vector<std::string>> commands = {
      {"search", "--task", "cpu/softmax_rows", "--proposer", "llm"},
      {"hitl", "--task", "cpu/softmax_rows"},
      {"evaluate", "--policy", "agent", "--task", "cpu/softmax_rows", "--out", (TestTempDir() / "eval").string()},
      {"collect", "--policy", "agent", "--task", "cpu/softmax_rows", "--out", (TestTempDir() / "collect").string()}};
  for (std::vector<std::string> argv : commands) {
    SpawnOptions options;
    argv.insert(argv.begin(), KERNELGYM_CLI);
    argv.insert(argv.end(), {"--endpoint", without_v1, "--model", "scripted"});
    options.argv = argv;
    options.env = {"NO_PROXY=127.0.0.1", "PATH=/usr/bin:/bin"};
    const ProcessResult run = RunProcess(options, 60);
    EXPECT_EQ(run.exit_code, 3) << argv[1] << ": " << run.Describe() << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("HTTP 404"), std::string::npos) << argv[1] << ": " << run.stderr_text;
  }
}

// The refusals only a chat call reveals (a hosted reasoning model's 400 for max_tokens, a
// small-context server's 400) end the run after that one call, as does a time budget shorter than
// the model's reply: the starter is still submitted, and the exit status says the model failed.
TEST(AgentTest, RefusalsAndSpentBudgetsEndTheRunAfterOneCall) {
  ServerProcess server({"--local-runners", "1"});
  struct Case {
    std::string name;
    nlohmann::json script;
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"hosted reasoning model",
       {{"endpoint", {{"reject_fields", {{"max_tokens", "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."}}}}},
        {"default", {{"content", "x"}}}},
       {},
       "Use 'max_completion_tokens' instead"},
      // Without the first contact the agent cannot know the server's context length (GET /models
      // gives it: see the next test); the refusal then says which flag to pass.
      {"small context", {{"endpoint", {{"context_window", 8192}}}, {"default", {{"content", "x"}}}},
       {"--max-tokens", "8192", "--no-endpoint-check"}, "maximum context length is 8192"},
      // The budget must outlast the starter's evaluation (seconds on a loaded CI machine: a
      // budget spent before the first call is an ordinary end, not a model failure) and end
      // inside the reply; a reply not cut would hold the run past RunAgent's 120 s limit.
      {"slow model, short budget", {{"default", {{"content", "x"}, {"delay_s", 600}}}}, {"--time-budget-s", "15"},
       "time budget"},
  };
  for (const Case& c : cases) {
    llm::ScriptedServer model(c.script);
    model.Start();
    std::vector<std::string> flags = {"--endpoint", model.base_url(), "--connect", server.clients(), "--report", "-"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    const ProcessResult run = RunAgent(flags, 120);
    EXPECT_EQ(run.exit_code, 3) << c.name << ": " << run.Describe() << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(c.expected), std::string::npos) << c.name << ": " << run.stderr_text;
    if (c.name == "small context")
      EXPECT_NE(run.stderr_text.find("--context-window"), std::string::npos) << c.name << ": " << run.stderr_text;
    EXPECT_EQ(model.requests().size(), 1u) << c.name << ": one call, then the run stops";
    const auto brace = run.stdout_text.find('{');
    ASSERT_NE(brace, std::string::npos) << c.name << ": " << run.stdout_text;
    const nlohmann::json report = nlohmann::json::parse(run.stdout_text.substr(brace));
    EXPECT_EQ(report["submit_status"], "ok") << c.name;  // the starter: the episode still ends properly
    EXPECT_EQ(report["steps"], 1) << c.name;
    EXPECT_FALSE(report["model_failure"].get<std::string>().empty()) << c.name;
  }
}

// One model with every dialect at once: a reasoning parser on the planner (reasoning_content), a
// reply whose thinking used the whole budget (content null, finish_reason "length"), inline <think>
// with a drafted diff, a "call it like this" snippet after the kernel, a tool call instead of
// content, a draft STOP inside the thinking, no usage in some replies, and a small context window.
// The run works: every implementation compiles and passes, the drafts are ignored, and the records
// read the same whichever way the thinking came. Round 1's kernel is slower than the starter and
// the tuner's gain comes after it: with --patience 2, round 2 (no gain either) ends the run only if
// the tuner's gain did not count.
TEST(AgentTest, AThinkingToolCallingModelOnASmallContextServerWorks) {
  ServerProcess server({"--local-runners", "1"});
  const std::filesystem::path source_dir(KERNELGYM_SOURCE_DIR);
  const std::string starter = ReadText(source_dir / "datasets/suites/cpu/softmax_rows/starter.cpp");
  // The starter with a second, useless exp pass that the compiler must keep: slower, still correct.
  std::string slow = starter;
  slow.replace(slow.find("        for (int64_t c = 0; c < C; ++c)\n            yr[c] = yr[c] / sum;"),
               std::string("        for (int64_t c = 0; c < C; ++c)\n            yr[c] = yr[c] / sum;").size(),
               "        static volatile float sink = 0;\n        for (int64_t c = 0; c < C; ++c) sink = sink + std::exp(xr[c] - m);\n"
               "        for (int64_t c = 0; c < C; ++c)\n            yr[c] = yr[c] / sum;");
  ASSERT_NE(slow, starter);
  const std::string plain = "// plain\n" + starter;
  const std::string plan = ReadText(source_dir / "policies/agent/scripted/softmax_rows/plan_1.md");
  const std::string tune = ReadText(source_dir / "policies/agent/scripted/softmax_rows/tune_1.md");
  const nlohmann::json tool_call = {{"name", "write_kernel"}, {"arguments", {{"source", plain}}}};
  const nlohmann::json script = {
      {"endpoint", {{"context_window", 16384}}},
      {"rules",
       {{{"match", "while you were still reasoning"},
         {"replies",
          {{"content", "<think>\nMaybe a diff:\n```diff\n@@ -1 +1 @@\n-a\n+b\n```\nNo: the whole kernel.\n</think>\n"
                       "Here is the kernel:\n```cpp:kernel.cpp\n" + slow + "```\nCall it like this:\n```cpp\n"
                       "std::vector<float> y(R * C);\nkernel(x.data(), y.data(), R, C);\n```\n"},
           {"usage", nullptr}}}},
        {{"match", "You are the planning engineer"},
         {"replies", {{"content", plan}, {"reasoning_content", "I should vectorize the exp."}}}},
        {{"match", "You are an expert"},
         {"replies",
          {{{"content", nullptr}, {"reasoning_content", "Thinking at length..."}, {"finish_reason", "length"}},
           {{"content", nullptr}, {"tool_calls", nlohmann::json::array({tool_call})}}}}},
        {{"match", "You are an autotuning engineer"}, {"replies", {{"content", tune}, {"usage", nullptr}}}},
        {{"match", "You are a performance analyst"},
         {"replies",
          {{{"content", "<think>DECISION: STOP - done already</think>\nThe exp dominates.\nDECISION: TUNE - the knobs"},
            {"usage", nullptr}},
           {{"content", "Close to the roofline.\nDECISION: STOP - enough now"}}}}}}}};
  llm::ScriptedServer model(script);
  model.Start();
  const std::filesystem::path transcript = server.dir() / "dialects.jsonl";
  const ProcessResult run =
      // No --context-window: the endpoint's GET /models gives max_model_len 16384 (as vLLM does), and
      // --max-tokens 16384 would be refused on every call unless the agent sized its requests by it.
      RunAgent({"--endpoint", model.base_url(), "--connect", server.clients(), "--max-tokens", "16384", "--seed", "3",
                "--patience", "2", "--transcript", transcript.string(), "--report", "-"});
  ASSERT_TRUE(run.ok()) << run.Describe() << "\n" << run.stderr_text << run.stdout_text;
  const nlohmann::json report = nlohmann::json::parse(run.stdout_text.substr(run.stdout_text.find('{')));
  EXPECT_EQ(report["rounds"], 2) << "the STOP drafted inside the thinking must not end round 1";
  EXPECT_NE(report["stop_reason"].get<std::string>().find("enough now"), std::string::npos)
      << report["stop_reason"] << ": the tuner's gain must reset --patience";
  EXPECT_GT(report["tuner_steps"].get<int>(), 0);
  EXPECT_GT(report["best_speedup"].get<double>(), report["starter_speedup"].get<double>());
  EXPECT_GT(report["chat"]["estimated_usage_calls"].get<int>(), 0);
  EXPECT_EQ(report["chat"]["truncated"], 1);
  // Both implementations compiled and passed: not the snippet, not the drafted diff, and the tool call was read.
  std::istringstream lines(ReadText(transcript));
  int implemented = 0;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json entry = nlohmann::json::parse(line);
    if (entry["kind"] == "step" && entry["phase"] == "implement") {
      ++implemented;
      EXPECT_EQ(entry["status"], "ok") << entry.dump();
    }
  }
  EXPECT_EQ(implemented, 2);
  bool asked_to_think_less = false;
  for (const llm::ScriptedRequest& r : model.requests()) {
    const int64_t limit = r.body["max_tokens"].get<int64_t>();
    EXPECT_LT(limit, 16384) << "the completion limit shrinks to fit the context window";
    asked_to_think_less = asked_to_think_less || r.body.dump().find("while you were still reasoning") != std::string::npos;
  }
  EXPECT_TRUE(asked_to_think_less);

  ASSERT_EQ(server.Terminate(30), 0);
  TrajectoryReader reader(server.store());
  int with_reasoning = 0;
  for (nlohmann::json record; reader.Next(record);) {
    if (record["kind"] != "transition" || !record.contains("meta")) continue;
    for (const nlohmann::json& e : record["meta"].value("exchanges", nlohmann::json::array())) {
      EXPECT_EQ(e["completion"].get<std::string>().find("<think>"), std::string::npos) << "thinking left in the answer";
      if (e.contains("reasoning")) ++with_reasoning;
    }
  }
  // The planner's twice (a field), the cut implementer reply (a field), its repair (inline), the
  // first analysis (inline).
  EXPECT_EQ(with_reasoning, 5);
}

// Without --connect the command starts its own server, and a prompt file with a typo is refused
// before anything is sent.
TEST(AgentTest, ABadPromptFileIsRefusedAtStartUp) {
  const std::filesystem::path dir = TestTempDir() / "bad-prompts";
  std::filesystem::create_directories(dir);
  std::filesystem::copy(std::filesystem::path(KERNELGYM_SOURCE_DIR) / "policies/roles/prompts", dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "planner.md") << "--- system ---\nplan {{tsk_id}}\n--- user ---\ngo\n";
  const ProcessResult run = RunAgent({"--endpoint", "http://127.0.0.1:9/v1", "--prompts", dir.string()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("planner.md:2: unknown variable 'tsk_id'"), std::string::npos) << run.stderr_text;
}

}  // namespace
}  // namespace kernelgym::testing
