// `kernelgym agent` and the flags every LLM-backed command shares (`kernelgym hitl` too).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "policies/agent/agent.h"
#include "policies/llm/chat_client.h"

namespace kernelgym::agent {

// Where the environment is: a running server, or one started for the command.
struct EnvFlags {
  std::string connect;      // empty: start a local `kernelgym serve`
  std::string record_dir;   // the local server's trajectory store (empty: a temporary one)
  double request_timeout_s = 600;
};

// The chat endpoint: --endpoint, --model, --api-key-env, --temperature, --max-tokens, ...
void AddChatFlags(CLI::App& command, llm::ChatOptions& chat, bool required);
void AddEnvFlags(CLI::App& command, EnvFlags& env);

struct AgentCommand {
  AgentOptions options;
  llm::ChatOptions chat;
  EnvFlags env;
  std::string prompts;     // the prompt files' folder
  std::string transcript;  // JSON lines of every exchange and step ("" : none)
  std::string report;      // the final report as JSON to this file ("" : none; "-": stdout)
  int repairs = 1;
  CLI::App* app = nullptr;
};

void AddAgentCommand(CLI::App& app, AgentCommand& command);
int RunAgentCommand(AgentCommand& command);

}  // namespace kernelgym::agent
