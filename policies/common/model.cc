#include "policies/common/model.h"

namespace kernelgym::policies {

bool LoadModel(const llm::ChatOptions& chat, const std::string& prompts_dir, int repairs, Model& model,
               std::string& error) {
  if (chat.base_url.empty()) return true;
  model.roles = roles::RoleSet::Load(prompts_dir.empty() ? roles::DefaultPromptsDir() : std::filesystem::path(prompts_dir),
                                     error);
  if (!model.roles) return false;
  model.chat = std::make_unique<llm::ChatClient>(chat);
  model.assistant = std::make_unique<roles::Assistant>(*model.chat, *model.roles, repairs);
  return true;
}

}  // namespace kernelgym::policies
