#include "policies/llm/chat_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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

// Fills `outcome` from a 2xx body; false when the body is not a chat completion with a text message.
bool ParseCompletion(const std::string& body, ChatOutcome& outcome, std::string& why) {
  Json reply = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) {
    why = "the body is not JSON";
    return false;
  }
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
  if (!message.contains("content") || !message["content"].is_string()) {
    why = "choices[0].message.content is not a string";
    return false;
  }
  outcome.content = message["content"].get<std::string>();
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    outcome.finish_reason = choice["finish_reason"].get<std::string>();
  }
  if (reply.contains("usage") && reply["usage"].is_object()) {
    const Json& usage = reply["usage"];
    if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer()) {
      outcome.usage.prompt_tokens = usage["prompt_tokens"].get<int64_t>();
    }
    if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer()) {
      outcome.usage.completion_tokens = usage["completion_tokens"].get<int64_t>();
    }
  }
  return true;
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
  }
  return "unknown";
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

std::string ChatRequestBody(const ChatOptions& options, const std::vector<ChatMessage>& messages) {
  Json body;
  body["model"] = options.model;
  Json& list = body["messages"] = Json::array();
  for (const ChatMessage& message : messages) list.push_back({{"role", message.role}, {"content", message.content}});
  body["temperature"] = options.temperature;
  body["max_tokens"] = options.max_tokens;
  return body.dump();
}

struct ChatClient::Impl {
  explicit Impl(ChatOptions opts) : options(std::move(opts)) {
    std::string base = options.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    url = base + "/chat/completions";
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

  // One POST; holds a concurrency slot only while the request is on the wire.
  Attempt Send(const std::string& body) {
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
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(std::llround(options.request_timeout_s * 1000)));
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

  void Count(const ChatOutcome& outcome) {
    std::lock_guard lock(totals_mutex);
    ++totals.calls;
    if (outcome.status == ChatStatus::kOk) {
      ++totals.ok;
    } else if (outcome.status == ChatStatus::kTruncated) {
      ++totals.truncated;
    } else {
      ++totals.failed;
      if (outcome.status == ChatStatus::kMalformed) ++totals.malformed;
    }
    totals.attempts += outcome.attempts;
    totals.retries = totals.attempts - totals.calls;
    totals.prompt_tokens += outcome.usage.prompt_tokens;
    totals.completion_tokens += outcome.usage.completion_tokens;
    totals.seconds += outcome.seconds;
  }

  const ChatOptions options;
  std::string url;  // base_url without a trailing '/' + "/chat/completions"

  std::mutex slot_mutex;
  std::condition_variable slot_freed;
  int in_flight = 0;  // guarded by slot_mutex

  mutable std::mutex totals_mutex;
  ChatTotals totals;  // guarded by totals_mutex

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

ChatOutcome ChatClient::Complete(const std::vector<ChatMessage>& messages) {
  const auto start = Clock::now();
  const std::string body = ChatRequestBody(impl_->options, messages);
  const std::string what = "POST " + impl_->url;
  const int max_attempts = 1 + std::max(0, impl_->options.retries);

  ChatOutcome outcome;
  for (int n = 1;; ++n) {
    Attempt attempt = impl_->Send(body);
    outcome = ChatOutcome{};
    outcome.attempts = n;
    outcome.http_status = attempt.http_status;
    bool retryable = false;

    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      outcome.status = ChatStatus::kTimeout;
      outcome.error = what + ": no reply within request_timeout_s=" + FormatSeconds(impl_->options.request_timeout_s) +
                      " s after " + Attempts(n) + ": " + attempt.curl_error;
      retryable = true;
    } else if (attempt.code != CURLE_OK) {
      outcome.status = ChatStatus::kTransportError;
      outcome.error = what + ": " + attempt.curl_error + " (after " + Attempts(n) + ")";
      retryable = IsRetryableTransport(attempt.code);
    } else if (attempt.http_status < 200 || attempt.http_status > 299) {
      outcome.status = ChatStatus::kHttpError;
      outcome.error = what + ": HTTP " + std::to_string(attempt.http_status) + " after " + Attempts(n) + ": " +
                      Excerpt(attempt.body);
      retryable = attempt.http_status == 429 || attempt.http_status >= 500;
    } else {
      std::string why;
      if (!ParseCompletion(attempt.body, outcome, why)) {
        outcome.status = ChatStatus::kMalformed;
        outcome.error = what + ": HTTP " + std::to_string(attempt.http_status) + " but not a chat completion (" + why +
                        "): " + Excerpt(attempt.body);
      } else if (outcome.finish_reason == "length") {
        outcome.status = ChatStatus::kTruncated;
        outcome.error = what + ": reply cut at max_tokens=" + std::to_string(impl_->options.max_tokens) +
                        " (finish_reason \"length\", " + std::to_string(outcome.content.size()) + " bytes kept)";
      } else {
        outcome.status = ChatStatus::kOk;
      }
    }

    if (!retryable || n >= max_attempts) break;
    const double wait_s = impl_->BackoffSeconds(n, attempt.retry_after);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  impl_->Count(outcome);
  return outcome;
}

}  // namespace kernelgym::llm
