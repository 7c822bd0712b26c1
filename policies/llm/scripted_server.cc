#include "policies/llm/scripted_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace kernelgym::llm {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// Enough workers that a concurrency test can hold several requests in delay_s at once while the
// server still accepts more.
constexpr size_t kWorkerThreads = 16;

struct Reply {
  std::string content;
  std::string finish_reason = "stop";
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;  // sent as is instead of a completion
  double delay_s = 0;
  std::optional<int64_t> prompt_tokens, completion_tokens;
};

// Replies are used in order; the last repeats. `next` is guarded by the server's mutex.
struct ReplyList {
  std::vector<Reply> replies;
  size_t next = 0;

  const Reply& Take() {
    const Reply& reply = replies[std::min(next, replies.size() - 1)];
    if (next < replies.size()) ++next;
    return reply;
  }
};

struct Rule {
  std::string match;  // "" matches every request
  ReplyList replies;
};

[[noreturn]] void Invalid(const std::string& field, const std::string& why) {
  throw std::invalid_argument(field + ": " + why);
}

void CheckKnownFields(const Json& object, const std::string& field, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      Invalid(field, "unknown field \"" + key + "\"");
    }
  }
}

std::string ReadFileOrThrow(const std::filesystem::path& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Invalid(field, "cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int64_t TokenCount(const Json& usage, const char* key, const std::string& field) {
  const Json& value = usage[key];
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    Invalid(field + "." + key, "must be a non-negative integer");
  }
  return value.get<int64_t>();
}

Reply ParseReply(const Json& json, const std::string& field, const std::filesystem::path& base_dir) {
  if (!json.is_object()) Invalid(field, "must be a map");
  CheckKnownFields(json, field,
                   {"content", "content_file", "finish_reason", "status", "headers", "body", "delay_s", "usage"});
  Reply reply;
  if (json.contains("content")) {
    if (!json["content"].is_string()) Invalid(field + ".content", "must be a string");
    if (json.contains("content_file")) Invalid(field + ".content_file", "give content or content_file, not both");
    reply.content = json["content"].get<std::string>();
  }
  if (json.contains("content_file")) {
    if (!json["content_file"].is_string()) Invalid(field + ".content_file", "must be a string");
    // Read now, so a missing file fails the script, not the request that would have used it.
    reply.content = ReadFileOrThrow(base_dir / json["content_file"].get<std::string>(), field + ".content_file");
  }
  if (json.contains("finish_reason")) {
    if (!json["finish_reason"].is_string()) Invalid(field + ".finish_reason", "must be a string");
    reply.finish_reason = json["finish_reason"].get<std::string>();
  }
  if (json.contains("status")) {
    if (!json["status"].is_number_integer()) Invalid(field + ".status", "must be an integer");
    reply.status = json["status"].get<int>();
    if (reply.status < 100 || reply.status > 599) Invalid(field + ".status", "must be an HTTP status (100-599)");
  }
  if (json.contains("headers")) {
    if (!json["headers"].is_object()) Invalid(field + ".headers", "must be a map of strings");
    for (const auto& [name, value] : json["headers"].items()) {
      if (!value.is_string()) Invalid(field + ".headers." + name, "must be a string");
      reply.headers.emplace_back(name, value.get<std::string>());
    }
  }
  if (json.contains("body")) {
    // A string is sent byte for byte (the way to script a body that is not JSON); any other JSON
    // value is sent serialized.
    reply.body = json["body"].is_string() ? json["body"].get<std::string>() : json["body"].dump();
  }
  if (json.contains("delay_s")) {
    if (!json["delay_s"].is_number() || json["delay_s"].get<double>() < 0) {
      Invalid(field + ".delay_s", "must be a non-negative number");
    }
    reply.delay_s = json["delay_s"].get<double>();
  }
  if (json.contains("usage")) {
    const Json& usage = json["usage"];
    if (!usage.is_object()) Invalid(field + ".usage", "must be a map");
    CheckKnownFields(usage, field + ".usage", {"prompt_tokens", "completion_tokens"});
    if (usage.contains("prompt_tokens")) reply.prompt_tokens = TokenCount(usage, "prompt_tokens", field + ".usage");
    if (usage.contains("completion_tokens")) {
      reply.completion_tokens = TokenCount(usage, "completion_tokens", field + ".usage");
    }
  }
  return reply;
}

// A REPLY list: an array of REPLY maps or a single REPLY.
ReplyList ParseReplies(const Json& json, const std::string& field, const std::filesystem::path& base_dir) {
  ReplyList list;
  if (json.is_object()) {
    list.replies.push_back(ParseReply(json, field, base_dir));
    return list;
  }
  if (!json.is_array()) Invalid(field, "must be a list of replies or one reply");
  if (json.empty()) Invalid(field, "must not be empty");
  for (size_t i = 0; i < json.size(); ++i) {
    list.replies.push_back(ParseReply(json[i], field + "[" + std::to_string(i) + "]", base_dir));
  }
  return list;
}

size_t WordCount(std::string_view text) {
  size_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// The texts of a request's messages: a string content, or the text parts of a list content.
std::vector<std::string> MessageTexts(const Json& messages) {
  std::vector<std::string> texts;
  for (const Json& message : messages) {
    if (!message.is_object() || !message.contains("content")) continue;
    const Json& content = message["content"];
    if (content.is_string()) {
      texts.push_back(content.get<std::string>());
    } else if (content.is_array()) {
      for (const Json& part : content) {
        if (part.is_object() && part.contains("text") && part["text"].is_string()) {
          texts.push_back(part["text"].get<std::string>());
        }
      }
    }
  }
  return texts;
}

Json ErrorBody(const std::string& message, const std::string& type) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
}

}  // namespace

struct ScriptedServer::Impl {
  std::filesystem::path base_dir;
  std::vector<Rule> rules;            // replies' `next` guarded by mutex
  std::optional<ReplyList> fallback;  // the script's "default"; `next` guarded by mutex

  httplib::Server http;
  std::thread listener;  // runs http.listen_after_bind(); joined by Stop()
  std::string host;
  int port = 0;
  Clock::time_point started;

  mutable std::mutex mutex;
  std::condition_variable stopping_changed;  // wakes replies waiting out delay_s
  bool stopping = false;
  int64_t completions = 0;  // numbers "scripted-N" ids
  int in_flight = 0, max_in_flight = 0;
  std::vector<ScriptedRequest> log;  // in arrival order; status 0 while a request is being answered

  double Since(Clock::time_point t) const { return std::chrono::duration<double>(t - started).count(); }

  // Picks the reply for a request whose messages have these texts; nullopt: no rule and no default.
  std::optional<Reply> Pick(const std::vector<std::string>& texts) {
    std::lock_guard lock(mutex);
    for (Rule& rule : rules) {
      const bool matches = rule.match.empty() || std::any_of(texts.begin(), texts.end(), [&](const std::string& t) {
                             return t.find(rule.match) != std::string::npos;
                           });
      if (matches) return rule.replies.Take();
    }
    if (fallback) return fallback->Take();
    return std::nullopt;
  }

  // Waits out delay_s, or less when Stop() is called.
  void Delay(double seconds) {
    if (seconds <= 0) return;
    std::unique_lock lock(mutex);
    stopping_changed.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping; });
  }

  void Answer(const Json& body, const Reply& reply, httplib::Response& res) {
    res.status = reply.status;
    for (const auto& [name, value] : reply.headers) res.set_header(name, value);
    if (reply.body) {
      res.set_content(*reply.body, "application/json");
      return;
    }
    if (reply.status < 200 || reply.status > 299) {
      const Json error = ErrorBody("scripted HTTP " + std::to_string(reply.status), "scripted_error");
      res.set_content(error.dump(), "application/json");
      return;
    }
    size_t prompt_words = 0;
    for (const std::string& text : MessageTexts(body["messages"])) prompt_words += WordCount(text);
    const int64_t prompt_tokens = reply.prompt_tokens.value_or(static_cast<int64_t>(prompt_words));
    const int64_t completion_tokens = reply.completion_tokens.value_or(static_cast<int64_t>(WordCount(reply.content)));
    int64_t id = 0;
    {
      std::lock_guard lock(mutex);
      id = ++completions;
    }
    const Json completion = {
        {"id", "scripted-" + std::to_string(id)},
        {"object", "chat.completion"},
        {"created", static_cast<int64_t>(std::time(nullptr))},
        {"model", body.contains("model") && body["model"].is_string() ? body["model"] : Json("scripted")},
        {"choices", Json::array({{{"index", 0},
                                  {"message", {{"role", "assistant"}, {"content", reply.content}}},
                                  {"finish_reason", reply.finish_reason}}})},
        {"usage",
         {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}}},
    };
    res.set_content(completion.dump(), "application/json");
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    size_t entry = 0;  // this request's place in the log, taken on arrival to keep arrival order
    {
      std::lock_guard lock(mutex);
      max_in_flight = std::max(max_in_flight, ++in_flight);
      entry = log.size();
      log.push_back(ScriptedRequest{Json(), req.get_header_value("Authorization"), 0, Since(Clock::now()), 0});
    }
    // Everything is caught here: a reply this server cannot build must still come back as HTTP.
    try {
      if (body.is_discarded() || !body.is_object() || !body.contains("messages") || !body["messages"].is_array()) {
        if (body.is_discarded()) body = req.body;  // logged as the text it was
        res.status = 400;
        res.set_content(
            ErrorBody("request body must be a JSON object with a \"messages\" array", "invalid_request_error").dump(),
            "application/json");
      } else if (std::optional<Reply> reply = Pick(MessageTexts(body["messages"]))) {
        Delay(reply->delay_s);
        Answer(body, *reply, res);
      } else {
        res.status = 500;
        res.set_content(ErrorBody("no scripted reply", "scripted_error").dump(), "application/json");
      }
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(ErrorBody(std::string("scripted server error: ") + e.what(), "scripted_error").dump(),
                      "application/json");
    }
    // Counted out before httplib writes the reply, so a client never holds a reply the server
    // still counts in flight.
    std::lock_guard lock(mutex);
    --in_flight;
    log[entry].body = std::move(body);
    log[entry].status = res.status;
    log[entry].answered_s = Since(Clock::now());
  }
};

ScriptedServer::ScriptedServer(nlohmann::json script, std::filesystem::path base_dir)
    : impl_(std::make_unique<Impl>()) {
  impl_->base_dir = std::move(base_dir);
  if (!script.is_object()) Invalid("script", "must be a map with \"rules\" and/or \"default\"");
  CheckKnownFields(script, "script", {"rules", "default"});
  if (script.contains("rules")) {
    const Json& rules = script["rules"];
    if (!rules.is_array()) Invalid("rules", "must be a list");
    for (size_t i = 0; i < rules.size(); ++i) {
      const std::string field = "rules[" + std::to_string(i) + "]";
      const Json& rule = rules[i];
      if (!rule.is_object()) Invalid(field, "must be a map");
      CheckKnownFields(rule, field, {"match", "replies"});
      Rule parsed;
      if (rule.contains("match")) {
        if (!rule["match"].is_string()) Invalid(field + ".match", "must be a string");
        parsed.match = rule["match"].get<std::string>();
      }
      if (!rule.contains("replies")) Invalid(field + ".replies", "missing");
      parsed.replies = ParseReplies(rule["replies"], field + ".replies", impl_->base_dir);
      impl_->rules.push_back(std::move(parsed));
    }
  }
  if (script.contains("default")) impl_->fallback = ParseReplies(script["default"], "default", impl_->base_dir);
}

std::unique_ptr<ScriptedServer> ScriptedServer::FromFile(const std::filesystem::path& script_file) {
  std::ifstream in(script_file, std::ios::binary);
  if (!in) throw std::invalid_argument(script_file.string() + ": cannot read");
  Json script = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (script.is_discarded()) throw std::invalid_argument(script_file.string() + ": not JSON");
  try {
    return std::make_unique<ScriptedServer>(std::move(script), script_file.parent_path());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(script_file.string() + ": " + e.what());
  }
}

ScriptedServer::~ScriptedServer() { Stop(); }

int ScriptedServer::Start(const std::string& host, int port) {
  Impl& impl = *impl_;
  if (impl.listener.joinable()) throw std::logic_error("ScriptedServer::Start called twice");
  impl.http.Post("/v1/chat/completions",
                 [&impl](const httplib::Request& req, httplib::Response& res) { impl.Handle(req, res); });
  impl.http.Post("/chat/completions",
                 [&impl](const httplib::Request& req, httplib::Response& res) { impl.Handle(req, res); });
  // One request per connection: a client idling on a kept-alive connection would otherwise hold
  // a worker (and Stop()) for the keep-alive timeout.
  impl.http.set_keep_alive_max_count(1);

  // httplib calls new_task_queue from inside listen_after_bind(), after it has marked itself
  // running; until then stop() would be a no-op, so Start() returns only once that has happened.
  auto running = std::make_shared<std::promise<void>>();
  std::future<void> running_future = running->get_future();
  impl.http.new_task_queue = [running] {
    running->set_value();
    return new httplib::ThreadPool(kWorkerThreads);
  };

  const int bound = port == 0 ? impl.http.bind_to_any_port(host) : (impl.http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) throw std::runtime_error("scripted LLM server: cannot bind " + host + ":" + std::to_string(port));
  impl.host = host;
  impl.port = bound;
  impl.started = Clock::now();
  impl.listener = std::thread([&impl] { impl.http.listen_after_bind(); });
  running_future.wait();
  while (!impl.http.is_running()) std::this_thread::yield();
  return bound;
}

void ScriptedServer::Stop() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->stopping_changed.notify_all();
  if (impl_->listener.joinable()) {
    impl_->http.stop();
    impl_->listener.join();
  }
}

std::string ScriptedServer::base_url() const {
  return "http://" + impl_->host + ":" + std::to_string(impl_->port) + "/v1";
}

std::vector<ScriptedRequest> ScriptedServer::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->log;
}

int ScriptedServer::max_in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->max_in_flight;
}

}  // namespace kernelgym::llm
