#include "policies/hitl/hitl_command.h"

#include <iostream>
#include <memory>

#include "policies/common/model.h"

namespace kernelgym::hitl {

void AddHitlCommand(CLI::App& app, HitlCommand& c) {
  c.app = app.add_subcommand("hitl", "the human-in-the-loop terminal: you drive the episode, the LLM roles assist");
  CLI::App& h = *c.app;
  h.add_option("--task", c.options.task, "task id, e.g. cpu/softmax_rows")->required();
  h.add_option("--backend", c.options.backend, "runner backend")->capture_default_str();
  policies::AddChatFlags(h, c.chat, /*required=*/false);
  policies::AddEnvFlags(h, c.env);
  h.add_option("--max-steps", c.options.max_steps, "the episode's step budget")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  h.add_option("--seed", c.options.seed, "the episode's seed (default: the server draws one)");
  h.add_option("--editor", c.options.editor, "the command that opens a file (default: $VISUAL, $EDITOR, vi)");
  h.add_flag("!--no-record", c.options.record, "do not record the episode in the trajectory store");
  h.add_option("--prompts", c.prompts, "the folder of role prompt files (default: $KERNELGYM_PROMPTS or the bundled ones)");
}

int RunHitlCommand(HitlCommand& c) {
  std::string error;
  policies::Model model;
  if (!policies::LoadModel(c.chat, c.prompts, c.repairs, model, error)) {
    std::cerr << "kernelgym hitl: " << error << "\n";
    return 2;
  }
  if (const std::string why = policies::CheckModelEndpoint(model); !why.empty()) {
    std::cerr << "kernelgym hitl: " << why << "\n";
    return policies::kExitModelUnusable;
  }
  if (model.assistant) c.options.model = c.chat.model;
  std::unique_ptr<policies::LocalServer> server;
  const std::string endpoint = policies::ConnectOrStart(c.env, c.options.backend, c.options.record, server, error);
  if (endpoint.empty()) {
    std::cerr << "kernelgym hitl: " << error << "\n";
    return 1;
  }
  try {
    client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
    HitlSession session(env, model.assistant.get(), c.options, std::cin, std::cout);
    return session.Run();
  } catch (const std::exception& e) {
    std::cerr << "kernelgym hitl: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kernelgym::hitl
