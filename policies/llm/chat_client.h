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
#pragma once

#include <cstdint>
#include <memory>
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

struct ChatOptions {
  std::string base_url;  // e.g. "http://127.0.0.1:8000/v1"; "/chat/completions" is appended
  std::string model;
  // The environment variable holding the API key (sent as "Authorization: Bearer KEY"). Unset or
  // empty: no Authorization header (local servers need none). The key itself never appears in
  // options, logs or recordings.
  std::string api_key_env = "OPENAI_API_KEY";
  double temperature = 0.2;
  int max_tokens = 4096;
  double request_timeout_s = 300;  // per attempt, connect included
  int retries = 4;                 // further attempts after a retryable failure
  double backoff_initial_s = 1, backoff_max_s = 60;
  int max_concurrency = 4;         // requests on the wire at once, across all threads
  uint64_t seed = 0;               // seeds the backoff jitter (0: from the clock)
};

enum class ChatStatus {
  kOk,              // a complete reply (finish_reason "stop" or none given)
  kTruncated,       // finish_reason "length": content holds the partial text
  kHttpError,       // a non-2xx status (after the retries, for the retryable ones)
  kTimeout,         // the last attempt ran past request_timeout_s
  kTransportError,  // connection refused, DNS, TLS, ... (after the retries)
  kMalformed,       // a 2xx whose body is not chat-completions JSON with a message
};
std::string_view ChatStatusName(ChatStatus status);  // "ok", "truncated", "http_error", ...

struct ChatUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0;  // as the endpoint reported them (0 if it did not)
};

struct ChatOutcome {
  ChatStatus status = ChatStatus::kTransportError;
  std::string content;        // the assistant message's text (the partial text when truncated)
  std::string finish_reason;  // as reported ("stop", "length", ...), empty if absent
  std::string error;          // not ok: what happened, e.g. "HTTP 503 after 5 attempts: <body excerpt>"
  int http_status = 0;        // of the last attempt (0: no HTTP reply)
  int attempts = 0;           // requests sent, >= 1
  double seconds = 0;         // wall time of the whole call, backoff waits included
  ChatUsage usage;
  bool ok() const { return status == ChatStatus::kOk; }
};

// Sums over every Complete() of one ChatClient (thread-safe snapshot).
struct ChatTotals {
  int64_t calls = 0, ok = 0, truncated = 0, failed = 0;  // failed: http_error, timeout, transport, malformed
  int64_t malformed = 0;                                  // also counted in failed
  int64_t attempts = 0, retries = 0;                      // retries = attempts - calls
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double seconds = 0;                                     // summed call wall time
  int max_in_flight = 0;                                  // the most requests that were on the wire at once
};

class ChatClient {
 public:
  explicit ChatClient(ChatOptions options);
  ~ChatClient();
  ChatClient(const ChatClient&) = delete;
  ChatClient& operator=(const ChatClient&) = delete;

  // One chat completion. Thread-safe; blocks while max_concurrency requests are in flight.
  ChatOutcome Complete(const std::vector<ChatMessage>& messages);

  ChatTotals totals() const;
  const ChatOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The wait a Retry-After header asks for, in seconds: delta-seconds ("3", "0.5") or an HTTP date
// ("Wed, 21 Oct 2015 07:28:00 GMT", relative to `now_unix`). nullopt when it is neither.
std::optional<double> ParseRetryAfter(std::string_view value, double now_unix);

// The request body Complete() sends, as JSON text (exposed for tests and for recordings).
std::string ChatRequestBody(const ChatOptions& options, const std::vector<ChatMessage>& messages);

}  // namespace kernelgym::llm
