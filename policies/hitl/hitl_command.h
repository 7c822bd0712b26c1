// `kernelgym hitl`: flags onto HitlOptions, then one interactive session on this terminal.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "policies/common/command_flags.h"
#include "policies/hitl/hitl.h"

namespace kernelgym::hitl {

struct HitlCommand {
  HitlOptions options;
  llm::ChatOptions chat;  // no --endpoint: no model, the person implements
  policies::EnvFlags env;
  std::string prompts;
  int repairs = 1;
  CLI::App* app = nullptr;
};

void AddHitlCommand(CLI::App& app, HitlCommand& command);
int RunHitlCommand(HitlCommand& command);

}  // namespace kernelgym::hitl
