// `kernelgym agent`: flags onto AgentOptions, then one run.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "policies/agent/agent.h"
#include "policies/common/command_flags.h"
#include "policies/llm/chat_client.h"

namespace kernelgym::agent {

struct AgentCommand {
  AgentOptions options;
  llm::ChatOptions chat;
  policies::EnvFlags env;
  std::string prompts;     // the prompt files' folder
  std::string transcript;  // JSON lines of every exchange and step ("" : none)
  std::string report;      // the final report as JSON to this file ("" : none; "-": stdout)
  int repairs = 1;
  CLI::App* app = nullptr;
};

void AddAgentCommand(CLI::App& app, AgentCommand& command);
int RunAgentCommand(AgentCommand& command);

}  // namespace kernelgym::agent
