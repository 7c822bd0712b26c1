// `kernelgym agent` end to end: the real command against a real server and runner, its model a
// scripted chat-completions endpoint (policies/agent/scripted/softmax_rows: a plan, a broken
// edit, a debugger fix, a TUNE decision, a knob search, a reply without code, a cut reply, STOP,
// and HTTP 429/503 on the way). Kernels are compiled and timed for real.
#include <gtest/gtest.h>

#include <map>

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

// No model at all (nothing listens at the endpoint): every ask fails, the agent says so, stops
// after `patience` rounds and still submits the starter — the run ends normally.
TEST(AgentTest, AnUnreachableEndpointEndsTheRunCleanly) {
  ServerProcess server({"--local-runners", "1"});
  const ProcessResult run = RunAgent({"--endpoint", "http://127.0.0.1:9/v1", "--connect", server.clients(),
                                      "--llm-retries", "0", "--patience", "2", "--report", "-"});
  ASSERT_TRUE(run.ok()) << run.Describe() << "\n" << run.stderr_text;
  const nlohmann::json report = nlohmann::json::parse(run.stdout_text.substr(run.stdout_text.find('{')));
  EXPECT_EQ(report["submit_status"], "ok");
  EXPECT_EQ(report["rounds"], 2);
  EXPECT_EQ(report["asks"]["failed_calls"], 3);  // plan, analysis, plan
  EXPECT_EQ(report["best_step"], 0);
  EXPECT_EQ(report["steps"], 1);  // submit only
  EXPECT_NE(report["stop_reason"].get<std::string>().find("2 rounds in a row"), std::string::npos);
  EXPECT_NE(run.stderr_text.find("127.0.0.1:9"), std::string::npos) << "the failure names the endpoint";
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
