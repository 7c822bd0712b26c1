// A client of the OpenAI-compatible chat-completions API (POST {base_url}/chat/completions), over
// libcurl. It is what every LLM policy (the agent, the HITL terminal's assistants) talks through,
// and works with anything that serves that API: vLLM, SGLang, llama.cpp's server, hosted providers,
// and kernelgym's own scripted endpoint (scripted_server.h) in the tests.
//
// Failures are values: Complete() never throws for anything the endpoint or the network does.
// A reply without usable text (HTTP errors after the retries, a timeout, a body that is not the
// API's JSON, a reply cut at max_tokens) comes back as a ChatOutcome with its status and a message
// that says what was sent and what came back, and is counted in totals().
//
// Retries: a 429, any 5xx, a timeout or a connection failure is retried up to `retries` more
// times. The wait before attempt n (n >= 1) is the reply's Retry-After when it has one (seconds
// or an HTTP date, capped at backoff_max_s), otherwise "full jitter" exponential backoff: uniform
// in [0, min(backoff_max_s, backoff_initial_s * 2^(n-1))]. Other 4xx (bad key, bad model, bad
// request) are not retried: sending the same request again cannot fix them.
//
// Threads: Complete() may be called from many threads at once; at most `max_concurrency` requests
// are on the wire at any moment (the others wait their turn before sending). Backoff waits do not
// hold a slot.
//
// Dialects: real servers deliver one reply in several shapes. `content` may be a string, a list of
// text parts or null; a reasoning model's thinking may come in `reasoning_content` or `reasoning`
// (a server with a reasoning parser) or inline in the content (one without: the reply reader,
// policies/roles/model_reply.h, separates it); a tool-calling model answers in `tool_calls`. The
// outcome keeps each part as delivered, and its usage even when the reply is otherwise unusable.
//
// Budgets (ChatBudget): a deadline, a token budget and a cost budget shared by every call of one
// client. They are enforced inside a call, not only between calls: an attempt's timeout never runs
// past the deadline, a backoff never waits past it, and a call's completion limit is cut to what
// the token and cost budgets have left. A call that cannot start within them returns kBudget.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernelgym::llm {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
  bool operator==(const ChatMessage&) const = default;
};

// Limits shared by every call of one client. 0 / nullopt: no limit.
struct ChatBudget {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int64_t max_tokens = 0;  // prompt + completion tokens over all calls
  double max_cost = 0;     // in the prices' currency
  double price_in_per_million = 0, price_out_per_million = 0;
};

struct ChatOptions {
  std::string base_url;  // e.g. "http://127.0.0.1:8000/v1"; "/chat/completions" is appended
  std::string model;
  // The environment variable holding the API key (sent as "Authorization: Bearer KEY"). Unset or
  // empty: no Authorization header (local servers need none). The key itself never appears in
  // options, logs or recordings.
  std::string api_key_env = "OPENAI_API_KEY";
  double temperature = 0.2;
  bool send_temperature = true;  // false: leave it out (reasoning models refuse any but their default)
  int max_tokens = 4096;
  // The request field that carries max_tokens: "max_tokens" (vLLM, SGLang, llama.cpp),
  // "max_completion_tokens" (OpenAI's reasoning models refuse the other), or "none" (not sent).
  std::string token_limit_field = "max_tokens";
  // The model's context window in tokens (0: unknown). When set, a request's completion limit
  // shrinks so that the prompt (estimated at 4 characters a token) plus the completion fit: a
  // small-context server otherwise refuses every long prompt with HTTP 400. 0 and the endpoint
  // checked (CheckEndpoint): the server's own figure where GET /models gives one.
  int context_window = 0;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
  ChatBudget budget;  // the client's budgets from the start (SetBudget/SetDeadline change them)
  // For the policy commands: contact the endpoint (CheckEndpoint) before a run starts.
  bool check_endpoint = true;
  double request_timeout_s = 300;  // per attempt, connect included
  int retries = 4;                 // further attempts after a retryable failure
  double backoff_initial_s = 1, backoff_max_s = 60;
  int max_concurrency = 4;         // requests on the wire at once, across all threads
  uint64_t seed = 0;               // seeds the backoff jitter (0: from the clock)
};

enum class ChatStatus {
  kOk,              // a complete reply (finish_reason "stop" or none given)
  kTruncated,       // finish_reason "length": content holds the partial text (maybe none)
  kHttpError,       // a non-2xx status (after the retries, for the retryable ones)
  kTimeout,         // the last attempt ran past request_timeout_s or the deadline
  kTransportError,  // connection refused, DNS, TLS, ... (after the retries)
  kMalformed,       // a 2xx whose body is not chat-completions JSON with a message
  kBudget,          // not sent: the deadline, token or cost budget is spent
};
std::string_view ChatStatusName(ChatStatus status);  // "ok", "truncated", "http_error", ..., "budget"

struct ChatUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  // The reply had no usage: the counts are estimated from the text (4 characters a token).
  bool estimated = false;
};

// One OpenAI-style tool call: the function's name and its arguments as the model wrote them.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text, as delivered (a model may write invalid JSON)
  bool operator==(const ChatToolCall&) const = default;
};

struct ChatOutcome {
  ChatStatus status = ChatStatus::kTransportError;
  std::string content;        // the message's text: a string, or its text parts joined (the partial text when truncated)
  std::string reasoning;      // `reasoning_content` or `reasoning`, when the server separated the thinking
  std::vector<ChatToolCall> tool_calls;
  std::string finish_reason;  // as reported ("stop", "length", ...), empty if absent
  std::string error;          // not ok: what happened, e.g. "HTTP 503 after 5 attempts: <body excerpt>"
  int http_status = 0;        // of the last attempt (0: no HTTP reply)
  int attempts = 0;           // requests sent (0 when the budget refused the call)
  double seconds = 0;         // wall time of the whole call, backoff waits included
  int max_tokens = 0;         // the completion limit this call was sent with (after the budgets)
  bool retryable = false;     // the last failure is of a kind retries address (429, 5xx, timeout, connection)
  ChatUsage usage;
  bool ok() const { return status == ChatStatus::kOk; }
  // The endpoint refused in a way that asking again cannot fix: a 4xx other than 408/409/429 (a
  // bad key, model, URL or request field), or a transport error retries do not address (a bad
  // URL, a certificate). A run should stop on it, not re-ask every round.
  bool fatal() const;
  // A short name for what went wrong, for counting: "http_401", "timeout", "transport", ...
  std::string failure_kind() const;
};

// Sums over every Complete() of one ChatClient (thread-safe snapshot).
struct ChatTotals {
  int64_t calls = 0, ok = 0, truncated = 0, failed = 0;  // failed: http_error, timeout, transport, malformed
  int64_t malformed = 0;                                  // also counted in failed
  int64_t refused = 0;                                    // kBudget: not sent (not in failed)
  int64_t attempts = 0, retries = 0;                      // retries = attempts - calls that were sent
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t estimated_usage_calls = 0;                      // calls whose tokens are estimates (no usage in the reply)
  double cost = 0;                                        // from the budget's prices (0 without)
  double seconds = 0;                                     // summed call wall time
  int max_in_flight = 0;                                  // the most requests that were on the wire at once
  std::map<std::string, int64_t> failures;                // failure_kind() -> calls
  std::string last_error;                                 // the latest failed call's error
  nlohmann::json ToJson() const;
};

class ChatClient {
 public:
  explicit ChatClient(ChatOptions options);
  ~ChatClient();
  ChatClient(const ChatClient&) = delete;
  ChatClient& operator=(const ChatClient&) = delete;

  // One chat completion. Thread-safe; blocks while max_concurrency requests are in flight.
  ChatOutcome Complete(const std::vector<ChatMessage>& messages);

  // A cheap first contact (GET {base_url}/models, one attempt, a short timeout) so that a run
  // against a wrong URL, a missing key or a server that is not there stops before it starts,
  // with the server's own message. "" when the endpoint answered; else why not. Where the
  // answer gives the model's context length (vLLM's max_model_len) and options.context_window is
  // 0, it becomes the context window. Call it before any Complete().
  std::string CheckEndpoint(double timeout_s = 10);

  void SetBudget(const ChatBudget& budget);  // applies to calls that start afterwards
  // Only the deadline (a run's time budget), keeping the token and cost budgets.
  void SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline);
  ChatTotals totals() const;
  const ChatOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The wait a Retry-After header asks for, in seconds: delta-seconds ("3", "0.5") or an HTTP date
// ("Wed, 21 Oct 2015 07:28:00 GMT", relative to `now_unix`). nullopt when it is neither.
std::optional<double> ParseRetryAfter(std::string_view value, double now_unix);

// The request body Complete() sends, as JSON text (exposed for tests and for recordings), with
// `max_tokens` as the completion limit (-1: options.max_tokens).
std::string ChatRequestBody(const ChatOptions& options, const std::vector<ChatMessage>& messages, int max_tokens = -1);

// Tokens a text is estimated at when a server reports none: 4 characters a token, rounded up.
int64_t EstimateTokens(std::string_view text);
int64_t EstimatePromptTokens(const std::vector<ChatMessage>& messages);

}  // namespace kernelgym::llm
