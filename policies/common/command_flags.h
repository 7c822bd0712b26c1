// What the policy commands (`kernelgym agent`, `kernelgym hitl`) share on the command line: the
// chat endpoint's flags and where the environment is (a running server, or one started here).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "policies/common/local_server.h"
#include "policies/llm/chat_client.h"

namespace kernelgym::policies {

struct EnvFlags {
  std::string connect;     // empty: start a local `kernelgym serve`
  std::string record_dir;  // the local server's trajectory store (empty: not kept)
  int local_runners = 1;   // the local server's runners
  double request_timeout_s = 600;
};

// --endpoint, --model, --api-key-env, --temperature, --max-tokens, --llm-timeout-s,
// --llm-retries, --llm-concurrency.
void AddChatFlags(CLI::App& command, llm::ChatOptions& chat, bool required);
// --connect, --record-dir.
void AddEnvFlags(CLI::App& command, EnvFlags& env);

// The endpoint to talk to: --connect's, or that of a server started here for `backend` (returned
// in `server`, which stops it when destroyed). Empty with `error` set when none could be started.
// `record` is cleared when a started server has nowhere to keep records (no --record-dir).
std::string ConnectOrStart(const EnvFlags& env, const std::string& backend, bool& record,
                           std::unique_ptr<LocalServer>& server, std::string& error);

}  // namespace kernelgym::policies
