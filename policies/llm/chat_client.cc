#include "policies/llm/chat_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>

namespace kernelgym::llm {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// Error messages quote this much of a reply body: enough to read an API's error message, not so
// much that a whole HTML error page floods a log line.
constexpr size_t kBodyExcerptBytes = 300;

void EnsureCurlGlobalInit() {
  // curl_global_init is not thread-safe on every libcurl build; a function-local static runs it
  // exactly once, whichever thread constructs the first client. It is never cleaned up: clients
  // may live until exit.
  [[maybe_unused]] static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

std::string Excerpt(std::string_view body) {
  if (body.size() <= kBodyExcerptBytes) return std::string(body);
  return std::string(body.substr(0, kBodyExcerptBytes)) + "...";
}

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

std::string Attempts(int n) { return std::to_string(n) + (n == 1 ? " attempt" : " attempts"); }

double UnixNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// What one HTTP exchange produced; Complete() decides from it whether to retry.
struct Attempt {
  CURLcode code = CURLE_OK;
  std::string curl_error;  // libcurl's own sentence when code != CURLE_OK
  int http_status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, "" if none
};

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Connection-level failures another attempt may not hit (a server restarting, a dropped
// connection). Everything else libcurl reports (a bad URL, a certificate that does not verify)
// fails the same way every time.
bool IsRetryableTransport(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// The message's text: a string, or a list of parts whose text parts are joined (some servers and
// proxies send content that way); null or absent is "".
std::string ContentText(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array()) {
    for (const Json& part : content) {
      if (part.is_string()) text += part.get<std::string>();
      else if (part.is_object() && part.contains("text") && part["text"].is_string()) text += part["text"].get<std::string>();
    }
  }
  return text;
}

void ReadUsage(const Json& reply, ChatUsage& usage) {
  if (!reply.is_object() || !reply.contains("usage") || !reply["usage"].is_object()) return;
  const Json& u = reply["usage"];
  if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) usage.prompt_tokens = u["prompt_tokens"].get<int64_t>();
  if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
    usage.completion_tokens = u["completion_tokens"].get<int64_t>();
  }
  usage.estimated = false;
}

bool HasUsage(const Json& reply) { return reply.is_object() && reply.contains("usage") && reply["usage"].is_object(); }

// Fills `outcome` from a 2xx body; false when the body is not a chat completion with a message
// that says anything (text, reasoning or a tool call). Usage is kept either way.
bool ParseCompletion(const std::string& body, ChatOutcome& outcome, std::string& why) {
  Json reply = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) {
    why = "the body is not JSON";
    return false;
  }
  ReadUsage(reply, outcome.usage);
  if (!reply.is_object() || !reply.contains("choices") || !reply["choices"].is_array() || reply["choices"].empty()) {
    why = "no choices[0]";
    return false;
  }
  const Json& choice = reply["choices"][0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object()) {
    why = "no choices[0].message";
    return false;
  }
  const Json& message = choice["message"];
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    outcome.finish_reason = choice["finish_reason"].get<std::string>();
  }
  const Json content = message.value("content", Json());
  if (!content.is_null() && !content.is_string() && !content.is_array()) {
    why = "choices[0].message.content is neither text, a list of parts nor null";
    return false;
  }
  outcome.content = ContentText(content);
  for (const char* field : {"reasoning_content", "reasoning"}) {
    if (message.contains(field) && message[field].is_string() && outcome.reasoning.empty()) {
      outcome.reasoning = message[field].get<std::string>();
    }
  }
  if (message.contains("tool_calls") && message["tool_calls"].is_array()) {
    for (const Json& call : message["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      const Json& function = call["function"];
      ChatToolCall tool;
      tool.name = function.value("name", Json("")).is_string() ? function.value("name", std::string()) : "";
      const Json arguments = function.value("arguments", Json(""));
      tool.arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
      outcome.tool_calls.push_back(std::move(tool));
    }
  }
  // A reply cut while the model was still thinking has nothing else, and is still a reply: the
  // caller asks again, shorter. Only a finished reply that says nothing at all is malformed.
  if (outcome.content.empty() && outcome.reasoning.empty() && outcome.tool_calls.empty() &&
      outcome.finish_reason != "length" && !content.is_string()) {
    why = "choices[0].message has no content, reasoning or tool calls";
    return false;
  }
  return true;
}

// What an error body says, in the server's words: OpenAI-style {"error": {"message"}}, or
// {"error": "..."}, {"message": "..."}, {"detail": "..."} (FastAPI); else the body's start.
std::string ServerMessage(const std::string& body) {
  const Json reply = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_object()) {
    const Json error = reply.value("error", Json());
    if (error.is_object() && error.contains("message") && error["message"].is_string()) return Excerpt(error["message"].get<std::string>());
    if (error.is_string()) return Excerpt(error.get<std::string>());
    for (const char* field : {"message", "detail"})
      if (reply.contains(field) && reply[field].is_string()) return Excerpt(reply[field].get<std::string>());
  }
  return Excerpt(body);
}

// What a status means for the person running the command, when it is one of the usual mistakes.
// Whether an error body says the request did not fit the model's context (vLLM: "This model's
// maximum context length is N tokens...", llama.cpp: "exceeds the available context size",
// OpenAI: "context_length_exceeded").
bool SaysContextTooLong(const std::string& body) {
  std::string lower = body;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* phrase : {"context length", "context_length", "context size", "context window", "max_model_len",
                             "maximum context", "too many tokens", "prompt is too long"})
    if (lower.find(phrase) != std::string::npos) return true;
  return false;
}

std::string Hint(int http_status, const ChatOptions& options, const std::string& body = "") {
  switch (http_status) {
    case 400:
    case 413:
      if (!SaysContextTooLong(body)) return "";
      return options.context_window > 0
                 ? " (the request did not fit context_window=" + std::to_string(options.context_window) +
                       "; is --context-window the server's own limit?)"
                 : " (the request did not fit the model's context: pass --context-window N, the server's limit "
                   "(vLLM: --max-model-len), so that replies are shortened to fit)";
    case 401:
    case 403:
      return " (is the API key in $" + options.api_key_env + "? --api-key-env names the variable)";
    case 404:
      return " (is the base URL right? most servers serve the API under /v1)";
    default:
      return "";
  }
}

// The context window a GET {base_url}/models answer gives for `model` (vLLM: "max_model_len";
// others: "context_length", "context_window"), from the entry with that id or, when there is one
// entry, that one; 0 when it gives none.
int ContextWindowFromModels(const std::string& body, const std::string& model) {
  const Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("data") || !parsed["data"].is_array()) return 0;
  const Json& data = parsed["data"];
  const Json* entry = data.size() == 1 ? &data[0] : nullptr;
  for (const Json& e : data)
    if (e.is_object() && e.contains("id") && e["id"].is_string() && e["id"].get<std::string>() == model) entry = &e;
  if (entry == nullptr || !entry->is_object()) return 0;
  for (const char* key : {"max_model_len", "context_length", "context_window"}) {
    if (!entry->contains(key) || !(*entry)[key].is_number_integer()) continue;
    const int64_t window = (*entry)[key].get<int64_t>();
    if (window > 0 && window <= std::numeric_limits<int>::max()) return static_cast<int>(window);
  }
  return 0;
}

}  // namespace

std::string_view ChatStatusName(ChatStatus status) {
  switch (status) {
    case ChatStatus::kOk:
      return "ok";
    case ChatStatus::kTruncated:
      return "truncated";
    case ChatStatus::kHttpError:
      return "http_error";
    case ChatStatus::kTimeout:
      return "timeout";
    case ChatStatus::kTransportError:
      return "transport_error";
    case ChatStatus::kMalformed:
      return "malformed";
    case ChatStatus::kBudget:
      return "budget";
  }
  return "unknown";
}

bool ChatOutcome::fatal() const {
  if (status == ChatStatus::kHttpError) {
    return http_status >= 400 && http_status < 500 && http_status != 408 && http_status != 409 && http_status != 429;
  }
  return status == ChatStatus::kTransportError && !retryable;
}

std::string ChatOutcome::failure_kind() const {
  if (status == ChatStatus::kHttpError) return "http_" + std::to_string(http_status);
  return std::string(ChatStatusName(status));
}

int64_t EstimateTokens(std::string_view text) { return static_cast<int64_t>((text.size() + 3) / 4); }

int64_t EstimatePromptTokens(const std::vector<ChatMessage>& messages) {
  int64_t tokens = 0;
  // A few tokens a message for the chat template's role markers.
  for (const ChatMessage& m : messages) tokens += EstimateTokens(m.content) + 4;
  return tokens;
}

Json ChatTotals::ToJson() const {
  Json out = {{"calls", calls},
              {"ok", ok},
              {"truncated", truncated},
              {"failed", failed},
              {"malformed", malformed},
              {"refused", refused},
              {"retries", retries},
              {"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"estimated_usage_calls", estimated_usage_calls},
              {"cost", cost},
              {"seconds", seconds},
              {"max_in_flight", max_in_flight},
              {"failures", failures}};
  if (!last_error.empty()) out["last_error"] = last_error;
  return out;
}

std::optional<double> ParseRetryAfter(std::string_view value, double now_unix) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r')) {
    value.remove_suffix(1);
  }
  if (value.empty()) return std::nullopt;
  // Delta-seconds first: curl_getdate would read a bare number as some date.
  if (std::all_of(value.begin(), value.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    double seconds = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (error != std::errc() || end != value.data() + value.size() || !std::isfinite(seconds)) {
      return std::nullopt;
    }
    return seconds;
  }
  // An HTTP date, parsed by libcurl's own parser (the one it uses for cookies and If-Modified-Since).
  const std::string text(value);
  const time_t when = curl_getdate(text.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  return std::max(0.0, static_cast<double>(when) - now_unix);
}

std::string ChatRequestBody(const ChatOptions& options, const std::vector<ChatMessage>& messages, int max_tokens) {
  Json body = options.extra_body.is_object() ? options.extra_body : Json::object();
  body["model"] = options.model;
  Json& list = body["messages"] = Json::array();
  for (const ChatMessage& message : messages) list.push_back({{"role", message.role}, {"content", message.content}});
  if (options.send_temperature) body["temperature"] = options.temperature;
  if (options.token_limit_field != "none") body[options.token_limit_field] = max_tokens < 0 ? options.max_tokens : max_tokens;
  // Invalid UTF-8 in a prompt (a kernel's bytes quoted back) must not make the whole request unsendable.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

struct ChatClient::Impl {
  explicit Impl(ChatOptions opts) : options(std::move(opts)) {
    std::string base = options.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    base_url = base;
    url = base + "/chat/completions";
    budget = options.budget;
    const uint64_t seed =
        options.seed != 0 ? options.seed : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    rng.seed(seed);
  }

  // Blocks until fewer than max_concurrency requests are on the wire, then takes a slot.
  void AcquireSlot() {
    const int limit = std::max(1, options.max_concurrency);
    int now_in_flight = 0;
    {
      std::unique_lock lock(slot_mutex);
      slot_freed.wait(lock, [&] { return in_flight < limit; });
      now_in_flight = ++in_flight;
    }
    std::lock_guard lock(totals_mutex);
    totals.max_in_flight = std::max(totals.max_in_flight, now_in_flight);
  }

  void ReleaseSlot() {
    {
      std::lock_guard lock(slot_mutex);
      --in_flight;
    }
    slot_freed.notify_one();
  }

  // One request (a POST of `body`, or a GET when `body` is null); holds a concurrency slot only
  // while the request is on the wire.
  Attempt Send(const std::string& target, const std::string* body, double timeout_s) {
    Attempt attempt;
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      attempt.code = CURLE_FAILED_INIT;
      attempt.curl_error = "curl_easy_init failed";
      return attempt;
    }
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    // Without this, libcurl asks "Expect: 100-continue" for large bodies and may stall a second
    // waiting for a go-ahead some servers never send.
    headers = curl_slist_append(headers, "Expect:");
    const char* key = options.api_key_env.empty() ? nullptr : std::getenv(options.api_key_env.c_str());
    if (key != nullptr && key[0] != '\0') {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + std::string(key)).c_str());
    }
    char error_buffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
    if (body != nullptr) {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, std::max(1L, static_cast<long>(std::llround(timeout_s * 1000))));
    // Signals cannot time out DNS lookups in a multi-threaded process; the threaded resolver does.
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "kernelgym-chat/0.1");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &attempt.body);

    AcquireSlot();
    attempt.code = curl_easy_perform(curl);
    ReleaseSlot();

    if (attempt.code == CURLE_OK) {
      long status = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      attempt.http_status = static_cast<int>(status);
      curl_header* header = nullptr;
      if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1, &header) == CURLHE_OK) {
        attempt.retry_after = header->value;
      }
    } else {
      attempt.curl_error = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(attempt.code);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return attempt;
  }

  // The wait before attempt n (n >= 1), per the header's contract.
  double BackoffSeconds(int n, const std::string& retry_after) {
    const double cap = std::max(0.0, options.backoff_max_s);
    if (!retry_after.empty()) {
      if (std::optional<double> asked = ParseRetryAfter(retry_after, UnixNow())) return std::min(*asked, cap);
    }
    const double ceiling = std::min(cap, options.backoff_initial_s * std::pow(2.0, n - 1));
    if (ceiling <= 0) return 0;
    std::lock_guard lock(rng_mutex);
    return std::uniform_real_distribution<double>(0, ceiling)(rng);
  }

  // Seconds left before the budget's deadline (infinity without one).
  double SecondsLeft() const {
    std::lock_guard lock(totals_mutex);
    if (!budget.deadline) return std::numeric_limits<double>::infinity();
    return std::chrono::duration<double>(*budget.deadline - Clock::now()).count();
  }

  // The completion limit a call may be sent with under the context window and the token and cost
  // budgets, reserved until the call ends; 0 with `why` when there is no room for a useful reply.
  int ReserveCompletion(int64_t prompt_tokens, std::string& why) {
    // Below this a reply cannot hold a kernel: refusing is more honest than a certain truncation.
    constexpr int64_t kMinUsefulCompletion = 64;
    int64_t limit = options.max_tokens;
    if (options.context_window > 0) {
      // Code tokenizes denser than prose: leave an eighth of the window for the estimate's error.
      const int64_t room = options.context_window - prompt_tokens - options.context_window / 8;
      if (room < kMinUsefulCompletion) {
        why = "the prompt (~" + std::to_string(prompt_tokens) + " tokens) leaves no room for a reply in context_window=" +
              std::to_string(options.context_window);
        return 0;
      }
      limit = std::min(limit, room);
    }
    std::lock_guard lock(totals_mutex);
    if (budget.max_tokens > 0) {
      const int64_t left = budget.max_tokens - totals.prompt_tokens - totals.completion_tokens - reserved_tokens - prompt_tokens;
      if (left < kMinUsefulCompletion) {
        why = "token budget spent (" + std::to_string(totals.prompt_tokens + totals.completion_tokens) + " of " +
              std::to_string(budget.max_tokens) + " used" + (reserved_tokens > 0 ? ", more in flight" : "") + ")";
        return 0;
      }
      limit = std::min(limit, left);
    }
    if (budget.max_cost > 0 && budget.price_out_per_million > 0) {
      const double left = budget.max_cost - totals.cost - reserved_cost -
                          static_cast<double>(prompt_tokens) * budget.price_in_per_million / 1e6;
      const auto affordable = static_cast<int64_t>(std::floor(left / budget.price_out_per_million * 1e6));
      if (affordable < kMinUsefulCompletion) {
        why = "cost budget spent (" + FormatSeconds(totals.cost) + " of " + FormatSeconds(budget.max_cost) + ")";
        return 0;
      }
      limit = std::min(limit, affordable);
    } else if (budget.max_cost > 0 && totals.cost >= budget.max_cost) {
      why = "cost budget spent (" + FormatSeconds(totals.cost) + " of " + FormatSeconds(budget.max_cost) + ")";
      return 0;
    }
    reserved_tokens += prompt_tokens + limit;
    reserved_cost += Cost(prompt_tokens, limit);
    return static_cast<int>(limit);
  }

  double Cost(int64_t prompt_tokens, int64_t completion_tokens) const {
    return (static_cast<double>(prompt_tokens) * budget.price_in_per_million +
            static_cast<double>(completion_tokens) * budget.price_out_per_million) / 1e6;
  }

  // Ends a call: its reservation is replaced by what it used.
  void Count(const ChatOutcome& outcome, int64_t reserved_prompt, int reserved_completion) {
    std::lock_guard lock(totals_mutex);
    reserved_tokens -= reserved_prompt + reserved_completion;
    reserved_cost -= Cost(reserved_prompt, reserved_completion);
    ++totals.calls;
    if (outcome.status == ChatStatus::kOk) {
      ++totals.ok;
    } else if (outcome.status == ChatStatus::kTruncated) {
      ++totals.truncated;
    } else if (outcome.status == ChatStatus::kBudget) {
      ++totals.refused;
    } else {
      ++totals.failed;
      if (outcome.status == ChatStatus::kMalformed) ++totals.malformed;
    }
    if (outcome.status != ChatStatus::kOk && outcome.status != ChatStatus::kTruncated) {
      ++totals.failures[outcome.failure_kind()];
      totals.last_error = outcome.error;
    }
    totals.attempts += outcome.attempts;
    if (outcome.attempts > 0) totals.retries += outcome.attempts - 1;
    totals.prompt_tokens += outcome.usage.prompt_tokens;
    totals.completion_tokens += outcome.usage.completion_tokens;
    if (outcome.usage.estimated) ++totals.estimated_usage_calls;
    totals.cost += Cost(outcome.usage.prompt_tokens, outcome.usage.completion_tokens);
    totals.seconds += outcome.seconds;
  }

  // Fixed at construction but for context_window, which CheckEndpoint fills in from the server
  // before any request is made (ChatClient::CheckEndpoint).
  ChatOptions options;
  std::string base_url;  // without a trailing '/'
  std::string url;       // base_url + "/chat/completions"

  std::mutex slot_mutex;
  std::condition_variable slot_freed;
  int in_flight = 0;  // guarded by slot_mutex

  mutable std::mutex totals_mutex;
  ChatTotals totals;             // guarded by totals_mutex
  ChatBudget budget;             // guarded by totals_mutex
  int64_t reserved_tokens = 0;   // guarded by totals_mutex: in-flight calls' prompt + completion limit
  double reserved_cost = 0;      // guarded by totals_mutex

  std::mutex rng_mutex;
  std::mt19937_64 rng;  // guarded by rng_mutex
};

ChatClient::ChatClient(ChatOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  EnsureCurlGlobalInit();
}

ChatClient::~ChatClient() = default;

const ChatOptions& ChatClient::options() const { return impl_->options; }

ChatTotals ChatClient::totals() const {
  std::lock_guard lock(impl_->totals_mutex);
  return impl_->totals;
}

void ChatClient::SetBudget(const ChatBudget& budget) {
  std::lock_guard lock(impl_->totals_mutex);
  impl_->budget = budget;
}

void ChatClient::SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::lock_guard lock(impl_->totals_mutex);
  impl_->budget.deadline = deadline;
}

std::string ChatClient::CheckEndpoint(double timeout_s) {
  const std::string target = impl_->base_url + "/models";
  const Attempt attempt = impl_->Send(target, nullptr, timeout_s);
  if (attempt.code != CURLE_OK) return "GET " + target + ": " + attempt.curl_error;
  if (attempt.http_status >= 200 && attempt.http_status <= 299) {
    // The server's context length, where it says and the user did not: requests are then sized
    // to fit instead of refused (a small-context server's first long prompt was an HTTP 400).
    if (impl_->options.context_window == 0) impl_->options.context_window = ContextWindowFromModels(attempt.body, impl_->options.model);
    return "";
  }
  return "GET " + target + ": HTTP " + std::to_string(attempt.http_status) + ": " + ServerMessage(attempt.body) +
         Hint(attempt.http_status, impl_->options, attempt.body);
}

ChatOutcome ChatClient::Complete(const std::vector<ChatMessage>& messages) {
  const auto start = Clock::now();
  const std::string what = "POST " + impl_->url;
  const int max_attempts = 1 + std::max(0, impl_->options.retries);
  const int64_t prompt_estimate = EstimatePromptTokens(messages);

  ChatOutcome outcome;
  std::string why;
  const int limit = impl_->ReserveCompletion(prompt_estimate, why);
  // Less time than a request can use is no time: a timed-out attempt returns a millisecond or
  // so before the deadline (curl counts whole milliseconds), and a call sent then only times out.
  constexpr double kShortestAttemptSeconds = 0.05;
  if (limit == 0 || impl_->SecondsLeft() < kShortestAttemptSeconds) {
    outcome.status = ChatStatus::kBudget;
    outcome.error = limit == 0 ? why : "time budget spent: the run's deadline has passed";
    outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    impl_->Count(outcome, limit == 0 ? 0 : prompt_estimate, limit);
    return outcome;
  }
  const std::string body = ChatRequestBody(impl_->options, messages, limit);

  for (int n = 1;; ++n) {
    // An attempt never runs past the deadline: the budget holds inside a call.
    const double left = impl_->SecondsLeft();
    const bool deadline_bound = left < impl_->options.request_timeout_s;
    Attempt attempt = impl_->Send(impl_->url, &body, std::min(impl_->options.request_timeout_s, left));
    outcome = ChatOutcome{};
    outcome.attempts = n;
    outcome.max_tokens = limit;
    outcome.http_status = attempt.http_status;

    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      outcome.status = ChatStatus::kTimeout;
      outcome.error = what + ": no reply within " +
                      (deadline_bound ? "the run's time budget"
                                      : "request_timeout_s=" + FormatSeconds(impl_->options.request_timeout_s) + " s") +
                      " after " + Attempts(n) + ": " + attempt.curl_error;
      outcome.retryable = !deadline_bound;
    } else if (attempt.code != CURLE_OK) {
      outcome.status = ChatStatus::kTransportError;
      outcome.error = what + ": " + attempt.curl_error + " (after " + Attempts(n) + ")";
      outcome.retryable = IsRetryableTransport(attempt.code);
    } else if (attempt.http_status < 200 || attempt.http_status > 299) {
      outcome.status = ChatStatus::kHttpError;
      outcome.error = what + ": HTTP " + std::to_string(attempt.http_status) + " after " + Attempts(n) + ": " +
                      ServerMessage(attempt.body) + Hint(attempt.http_status, impl_->options, attempt.body);
      outcome.retryable = attempt.http_status == 408 || attempt.http_status == 429 || attempt.http_status >= 500;
    } else {
      outcome.usage.estimated = true;  // until the body says otherwise
      if (!ParseCompletion(attempt.body, outcome, why)) {
        outcome.status = ChatStatus::kMalformed;
        outcome.error = what + ": HTTP " + std::to_string(attempt.http_status) + " but not a chat completion (" + why +
                        "): " + Excerpt(attempt.body);
      } else if (outcome.finish_reason == "length") {
        outcome.status = ChatStatus::kTruncated;
        outcome.error = what + ": reply cut at max_tokens=" + std::to_string(limit) + " (finish_reason \"length\", " +
                        std::to_string(outcome.content.size()) + " bytes of answer" +
                        (outcome.reasoning.empty() ? "" : ", " + std::to_string(outcome.reasoning.size()) + " of reasoning") +
                        " kept)";
      } else {
        outcome.status = ChatStatus::kOk;
      }
      if (outcome.usage.estimated) {
        // No usage in the reply: estimate it, so that budgets and costs do not read 0.
        std::string said = outcome.content + outcome.reasoning;
        for (const ChatToolCall& call : outcome.tool_calls) said += call.name + call.arguments;
        outcome.usage.prompt_tokens = prompt_estimate;
        outcome.usage.completion_tokens = EstimateTokens(said);
      }
    }

    if (!outcome.retryable || n >= max_attempts) break;
    const double wait_s = impl_->BackoffSeconds(n, attempt.retry_after);
    if (wait_s >= impl_->SecondsLeft()) {
      outcome.error += " (no retry: the run's time budget ends first)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  impl_->Count(outcome, prompt_estimate, limit);
  return outcome;
}

}  // namespace kernelgym::llm
