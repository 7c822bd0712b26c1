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

}  // namespace kernelgym::policies
