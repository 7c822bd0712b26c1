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
  command.add_option("--token-limit-field", chat.token_limit_field,
                     "the request field for --max-tokens: max_completion_tokens for OpenAI's reasoning models, none to "
                     "send no limit")
      ->capture_default_str()
      ->check(CLI::IsMember({"max_tokens", "max_completion_tokens", "none"}));
  command.add_flag("!--no-temperature", chat.send_temperature,
                   "send no temperature (models that accept only their default)");
  command
      .add_option_function<std::string>(
          "--extra-body",
          [&chat](const std::string& text) {
            nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
            if (!body.is_object()) throw CLI::ValidationError("--extra-body", "must be a JSON object, e.g. '{\"top_p\": 0.9}'");
            chat.extra_body = std::move(body);
          },
          "a JSON object merged into every chat request, e.g. '{\"reasoning_effort\": \"low\"}' or "
          "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'")
      ->type_name("JSON");
  command.add_option("--context-window", chat.context_window,
                     "the model's context length in tokens: the completion limit shrinks so prompt + reply fit "
                     "(0: unknown)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  command.add_option("--llm-token-budget", chat.budget.max_tokens,
                     "prompt + completion tokens the run may spend over all calls (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command.add_option("--llm-cost-budget", chat.budget.max_cost,
                     "what the run may spend, in the currency of --price-in/--price-out (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command.add_option("--price-in", chat.budget.price_in_per_million, "cost per million prompt tokens")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--price-out", chat.budget.price_out_per_million, "cost per million completion tokens")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("!--no-endpoint-check", chat.check_endpoint,
                   "skip the first contact (GET {endpoint}/models) that stops a run against a wrong URL or key at once");
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
