// The model behind a policy command (`--endpoint`, `--model`, `--prompts`): the role prompt files,
// a chat client, and an assistant over both. Empty when no endpoint is given.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "policies/llm/chat_client.h"
#include "policies/roles/assistant.h"
#include "policies/roles/roles.h"

namespace kernelgym::policies {

struct Model {
  Model() = default;
  Model(const Model&) = delete;  // the assistant refers to `roles` and `chat`: the Model stays put
  Model& operator=(const Model&) = delete;

  std::optional<roles::RoleSet> roles;
  std::unique_ptr<llm::ChatClient> chat;
  std::unique_ptr<roles::Assistant> assistant;  // null: no model configured
};

// Loads the prompts from `prompts_dir` (empty: roles::DefaultPromptsDir()) when `chat` names an
// endpoint; does nothing otherwise. False with `error` (the file and line) for bad prompt files.
bool LoadModel(const llm::ChatOptions& chat, const std::string& prompts_dir, int repairs, Model& model,
               std::string& error);

// The exit status of a policy command whose model endpoint could not be used: refused at the
// first contact, refused for good during the run, or never gave a usable reply.
inline constexpr int kExitModelUnusable = 3;

// The first contact with a loaded model's endpoint (ChatClient::CheckEndpoint), unless the options
// say not to: "" when it answered (or there is no model), else the reason, in the server's words.
std::string CheckModelEndpoint(Model& model);

// One line on a run's chat calls: calls, retries, failures by kind, tokens (and whether any are
// estimates), cost when priced.
std::string DescribeChat(const llm::ChatTotals& totals);

}  // namespace kernelgym::policies
