// The fixture the chat client's tests share: a scripted endpoint (policies/llm/scripted_server.h)
// in this process, and client options for it that make retries fast and deterministic.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "policies/llm/chat_client.h"
#include "policies/llm/scripted_server.h"

namespace kernelgym::llm {

class ScriptedChatTest : public ::testing::Test {
 protected:
  static constexpr const char* kKeyVariable = "KERNELGYM_CHAT_TEST_KEY";

  void SetUp() override {
    // A proxy from the environment must not intercept requests to the local server.
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    setenv("no_proxy", "127.0.0.1,localhost", 1);
    unsetenv(kKeyVariable);
  }

  ScriptedServer& Serve(nlohmann::json script) {
    server_ = std::make_unique<ScriptedServer>(std::move(script));
    server_->Start();
    return *server_;
  }

  // Options for the current server: fast backoff, a fixed seed, and an API key variable that is
  // unset unless a test sets it.
  ChatOptions Options() const {
    ChatOptions options;
    options.base_url = server_->base_url();
    options.model = "test-model";
    options.api_key_env = kKeyVariable;
    options.temperature = 0.5;
    options.max_tokens = 123;
    options.request_timeout_s = 10;
    options.retries = 2;
    options.backoff_initial_s = 0.001;
    options.backoff_max_s = 0.01;
    options.seed = 7;
    return options;
  }

  std::unique_ptr<ScriptedServer> server_;
};

}  // namespace kernelgym::llm
