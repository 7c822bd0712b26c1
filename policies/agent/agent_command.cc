#include "policies/agent/agent_command.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>

#include "policies/common/local_server.h"
#include "policies/common/model.h"

namespace kernelgym::agent {

void AddAgentCommand(CLI::App& app, AgentCommand& c) {
  c.app = app.add_subcommand("agent", "the autonomous LLM agent: plan, implement, debug, profile, tune; submits the best");
  CLI::App& a = *c.app;
  a.add_option("--task", c.options.task, "task id, e.g. cpu/softmax_rows")->required();
  a.add_option("--backend", c.options.backend, "runner backend")->capture_default_str();
  policies::AddChatFlags(a, c.chat, /*required=*/true);
  policies::AddEnvFlags(a, c.env);
  a.add_option("--max-steps", c.options.max_steps, "the episode's step budget, submit included")
      ->capture_default_str()
      ->check(CLI::Range(3, 10000));
  a.add_option("--time-budget-s", c.options.time_budget_s, "wall-clock budget of the run")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  a.add_option("--rounds", c.options.rounds, "plan/implement rounds at most")->capture_default_str()->check(CLI::Range(1, 1000));
  a.add_option("--debug-attempts", c.options.debug_attempts, "debugger steps per failing implementation")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  a.add_option("--patience", c.options.patience, "stop after this many rounds in a row without a new best")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  a.add_option("--tuner-evaluations", c.options.tuner_evaluations, "steps the tuner's search space may use")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  a.add_option("--repairs", c.repairs, "re-asks after an unusable reply (no code, missing plan section, ...)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  a.add_option("--seed", c.options.seed, "the episode's seed (default: the server draws one)");
  a.add_flag("!--no-record", c.options.record, "do not record the episode in the trajectory store");
  a.add_option("--prompts", c.prompts, "the folder of role prompt files (default: $KERNELGYM_PROMPTS or the bundled ones)");
  a.add_option("--transcript", c.transcript, "write every chat exchange and step here as JSON lines");
  a.add_option("--report", c.report, "write the final report as JSON here (- for stdout)");
}

int RunAgentCommand(AgentCommand& c) {
  std::string error;
  policies::Model model;  // --endpoint and --model are required: the model is always there
  if (!policies::LoadModel(c.chat, c.prompts, c.repairs, model, error)) {
    std::cerr << "kernelgym agent: " << error << "\n";
    return 2;
  }
  if (const std::string why = policies::CheckModelEndpoint(model); !why.empty()) {
    std::cerr << "kernelgym agent: " << why << "\n";
    return policies::kExitModelUnusable;
  }
  std::unique_ptr<std::ofstream> transcript;
  if (!c.transcript.empty()) {
    transcript = std::make_unique<std::ofstream>(c.transcript);
    if (!*transcript) {
      std::cerr << "kernelgym agent: cannot write " << c.transcript << "\n";
      return 2;
    }
  }
  std::unique_ptr<policies::LocalServer> server;
  const std::string endpoint = policies::ConnectOrStart(c.env, c.options.backend, c.options.record, server, error);
  if (endpoint.empty()) {
    std::cerr << "kernelgym agent: " << error << "\n";
    return 1;
  }
  if (server) std::cerr << "kernelgym agent: started a local server at " << endpoint << "\n";
  c.options.model = c.chat.model;
  try {
    client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
    Agent agent(env, *model.assistant, c.options, std::cerr, transcript.get());
    const AgentReport report = agent.Run();
    std::cout << std::fixed << std::setprecision(2) << "task " << report.task << " on " << report.backend << ": best "
              << report.best_speedup << "x the reference at step " << report.best_step << " (starter "
              << report.starter_speedup << "x); submitted: " << report.submit_status << " " << report.submit_speedup
              << "x\n"
              << report.steps << " steps in " << report.rounds << " rounds; " << policies::DescribeChat(report.chat)
              << "; " << report.seconds << " s\nstopped: " << report.stop_reason << "\n";
    if (!c.report.empty()) {
      const std::string text = report.ToJson().dump(2) + "\n";
      if (c.report == "-") std::cout << text;
      else std::ofstream(c.report) << text;
    }
    if (!report.model_failure.empty()) {
      std::cerr << "kernelgym agent: " << report.model_failure << "\n";
      return policies::kExitModelUnusable;
    }
    return report.submitted && report.submit_status == "ok" ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kernelgym agent: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kernelgym::agent
