#include "policies/agent/agent_command.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>

#include "policies/common/local_server.h"
#include "policies/roles/roles.h"

namespace kernelgym::agent {

void AddChatFlags(CLI::App& command, llm::ChatOptions& chat, bool required) {
  auto* endpoint = command.add_option("--endpoint", chat.base_url,
                                      "an OpenAI-compatible API's base URL, e.g. http://127.0.0.1:8000/v1 (vLLM, "
                                      "SGLang, llama.cpp server) or a hosted provider's");
  auto* model = command.add_option("--model", chat.model, "the model name the endpoint serves");
  if (required) {
    endpoint->required();
    model->required();
  }
  command.add_option("--api-key-env", chat.api_key_env,
                     "the environment variable holding the API key (unset: no Authorization header)")
      ->capture_default_str();
  command.add_option("--temperature", chat.temperature, "sampling temperature")->capture_default_str()->check(CLI::Range(0.0, 2.0));
  command.add_option("--max-tokens", chat.max_tokens, "completion token limit per reply")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  command.add_option("--llm-timeout-s", chat.request_timeout_s, "seconds per chat request")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 7200.0));
  command.add_option("--llm-retries", chat.retries, "retries after 429, 5xx and timeouts")
      ->capture_default_str()
      ->check(CLI::Range(0, 20));
  command.add_option("--llm-concurrency", chat.max_concurrency, "chat requests in flight at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
}

void AddEnvFlags(CLI::App& command, EnvFlags& env) {
  command.add_option("--connect", env.connect,
                     "a running server's client endpoint (default: start one here with one local runner)");
  command.add_option("--record-dir", env.record_dir,
                     "with no --connect: the started server's trajectory store (default: not kept)");
}

void AddAgentCommand(CLI::App& app, AgentCommand& c) {
  c.app = app.add_subcommand("agent", "the autonomous LLM agent: plan, implement, debug, profile, tune; submits the best");
  CLI::App& a = *c.app;
  a.add_option("--task", c.options.task, "task id, e.g. cpu/softmax_rows")->required();
  a.add_option("--backend", c.options.backend, "runner backend")->capture_default_str();
  AddChatFlags(a, c.chat, /*required=*/true);
  AddEnvFlags(a, c.env);
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
  const std::filesystem::path prompts = c.prompts.empty() ? roles::DefaultPromptsDir() : std::filesystem::path(c.prompts);
  const std::optional<roles::RoleSet> role_set = roles::RoleSet::Load(prompts, error);
  if (!role_set) {
    std::cerr << "kernelgym agent: " << error << "\n";
    return 2;
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
  std::string endpoint = c.env.connect;
  if (endpoint.empty()) {
    std::vector<std::string> extra = {"--local-runner-backends", c.options.backend};
    if (!c.env.record_dir.empty()) extra.insert(extra.end(), {"--record-dir", c.env.record_dir});
    else c.options.record = false;  // nowhere to keep it
    server = policies::LocalServer::Start(policies::SelfExecutable(), extra, 120, error);
    if (!server) {
      std::cerr << "kernelgym agent: " << error << "\n";
      return 1;
    }
    endpoint = server->endpoint();
    std::cerr << "kernelgym agent: started a local server at " << endpoint << "\n";
  }
  c.options.model = c.chat.model;
  try {
    client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
    llm::ChatClient chat(c.chat);
    roles::Assistant assistant(chat, *role_set, c.repairs);
    Agent agent(env, assistant, c.options, std::cerr, transcript.get());
    const AgentReport report = agent.Run();
    std::cout << std::fixed << std::setprecision(2) << "task " << report.task << " on " << report.backend << ": best "
              << report.best_speedup << "x the reference at step " << report.best_step << " (starter "
              << report.starter_speedup << "x); submitted: " << report.submit_status << " " << report.submit_speedup
              << "x\n"
              << report.steps << " steps in " << report.rounds << " rounds; " << report.chat.calls << " chat calls ("
              << report.chat.retries << " retries, " << report.asks.bad_replies << " unusable replies, "
              << report.chat.failed << " failed), " << report.chat.prompt_tokens << " prompt + "
              << report.chat.completion_tokens << " completion tokens; " << report.seconds << " s\nstopped: "
              << report.stop_reason << "\n";
    if (!c.report.empty()) {
      const std::string text = report.ToJson().dump(2) + "\n";
      if (c.report == "-") std::cout << text;
      else std::ofstream(c.report) << text;
    }
    return report.submitted && report.submit_status == "ok" ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kernelgym agent: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kernelgym::agent
