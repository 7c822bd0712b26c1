#include "policies/common/model.h"

#include <cstdio>

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

std::string CheckModelEndpoint(Model& model) {
  if (!model.chat || !model.chat->options().check_endpoint) return "";
  const std::string why = model.chat->CheckEndpoint();
  return why.empty() ? "" : "the model endpoint is not usable: " + why + " (--no-endpoint-check skips this check)";
}

std::string DescribeChat(const llm::ChatTotals& totals) {
  std::string failures;
  for (const auto& [kind, count] : totals.failures) {
    failures += (failures.empty() ? "" : ", ") + std::to_string(count) + " " + kind;
  }
  std::string text = std::to_string(totals.calls) + " chat calls (" + std::to_string(totals.retries) + " retries, " +
                     std::to_string(totals.truncated) + " cut at the token limit, " +
                     (failures.empty() ? std::string("none failed") : "failed: " + failures) + "), " +
                     std::to_string(totals.prompt_tokens) + " prompt + " + std::to_string(totals.completion_tokens) +
                     " completion tokens";
  if (totals.estimated_usage_calls > 0) {
    text += " (" + std::to_string(totals.estimated_usage_calls) +
            " calls reported no usage: their tokens are estimated from the text)";
  }
  if (totals.cost > 0) {
    char cost[32];
    std::snprintf(cost, sizeof cost, "%.4g", totals.cost);
    text += ", cost " + std::string(cost);
  }
  return text;
}

}  // namespace kernelgym::policies
