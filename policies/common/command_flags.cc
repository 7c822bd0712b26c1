#include "policies/common/command_flags.h"

namespace kernelgym::policies {

void AddChatFlags(CLI::App& command, llm::ChatOptions& chat, bool required) {
  auto* endpoint = command.add_option("--endpoint", chat.base_url,
                                      "an OpenAI-compatible API's base URL, e.g. http://127.0.0.1:8000/v1 (vLLM, "
                                      "SGLang, llama.cpp server) or a hosted provider's");
  auto* model = command.add_option("--model", chat.model, "the model name the endpoint serves");
  if (required) {
    endpoint->required();
    model->required();
  } else {
    endpoint->needs(model);
    model->needs(endpoint);
  }
  command.add_option("--api-key-env", chat.api_key_env,
                     "the environment variable holding the API key (unset: no Authorization header)")
      ->capture_default_str();
  command.add_option("--temperature", chat.temperature, "sampling temperature")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 2.0));
  command.add_option("--max-tokens", chat.max_tokens, "completion token limit per reply")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  command.add_option("--llm-timeout-s", chat.request_timeout_s, "seconds per chat request")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 7200.0));
  command.add_option("--llm-retries", chat.retries, "retries after 429, 5xx and timeouts")
      ->capture_default_str()
      ->check(CLI::Range(0, 20));
  command.add_option("--llm-concurrency", chat.max_concurrency, "chat requests in flight at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
}

void AddEnvFlags(CLI::App& command, EnvFlags& env) {
  command.add_option("--connect", env.connect,
                     "a running server's client endpoint (default: start one here with one local runner)");
  command.add_option("--record-dir", env.record_dir,
                     "with no --connect: the started server's trajectory store (default: not kept)");
  command.add_option("--local-runners", env.local_runners, "with no --connect: the started server's runners")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

std::string ConnectOrStart(const EnvFlags& env, const std::string& backend, bool& record,
                           std::unique_ptr<LocalServer>& server, std::string& error) {
  if (!env.connect.empty()) return env.connect;
  std::vector<std::string> extra = {"--local-runner-backends", backend};
  if (!env.record_dir.empty()) extra.insert(extra.end(), {"--record-dir", env.record_dir});
  record = !env.record_dir.empty() && record;  // nowhere to keep it without a store
  server = LocalServer::Start(SelfExecutable(), env.local_runners, extra, 120, error);
  return server ? server->endpoint() : "";
}

}  // namespace kernelgym::policies
