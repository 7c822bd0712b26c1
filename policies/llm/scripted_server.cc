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

struct ToolCall {
  std::optional<std::string> id;  // nullopt: "call_N"
  std::string name;
  std::string arguments;  // JSON text (or whatever the script gave)
};

struct Reply {
  Json content = "";  // message.content: a string, null, or a list of text parts
  std::string words;  // the texts the reply sends, for the default completion_tokens
  std::optional<std::string> reasoning_content, reasoning;
  std::optional<std::vector<ToolCall>> tool_calls;
  std::optional<std::string> finish_reason;  // nullopt: "tool_calls" or "stop"
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;  // sent as is instead of a completion
  double delay_s = 0;
  bool send_usage = true;  // false: usage: null, no "usage" field
  std::optional<int64_t> prompt_tokens, completion_tokens;
};

// The script's "endpoint": checks a real server makes before it answers.
struct Endpoint {
  std::optional<std::string> api_key;
  std::vector<std::pair<std::string, std::string>> reject_fields;  // field, message; name order
  std::vector<std::string> require_fields;
  std::optional<int64_t> context_window;
  std::vector<std::string> models = {"scripted"};
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

std::string StringField(const Json& json, const char* key, const std::string& field) {
  if (!json[key].is_string()) Invalid(field + "." + key, "must be a string");
  return json[key].get<std::string>();
}

std::vector<ToolCall> ParseToolCalls(const Json& json, const std::string& field) {
  if (!json.is_array()) Invalid(field, "must be a list of {\"name\", \"arguments\"} maps");
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < json.size(); ++i) {
    const std::string call_field = field + "[" + std::to_string(i) + "]";
    const Json& call = json[i];
    if (!call.is_object()) Invalid(call_field, "must be a map");
    CheckKnownFields(call, call_field, {"id", "name", "arguments"});
    ToolCall parsed;
    if (!call.contains("name")) Invalid(call_field + ".name", "missing");
    parsed.name = StringField(call, "name", call_field);
    if (call.contains("id")) parsed.id = StringField(call, "id", call_field);
    parsed.arguments = "{}";
    if (call.contains("arguments")) {
      const Json& arguments = call["arguments"];
      if (arguments.is_string()) {
        parsed.arguments = arguments.get<std::string>();
      } else if (arguments.is_object()) {
        parsed.arguments = arguments.dump();  // the API sends arguments as JSON text
      } else {
        Invalid(call_field + ".arguments", "must be a string or a map");
      }
    }
    calls.push_back(std::move(parsed));
  }
  return calls;
}

Reply ParseReply(const Json& json, const std::string& field, const std::filesystem::path& base_dir) {
  if (!json.is_object()) Invalid(field, "must be a map");
  CheckKnownFields(json, field,
                   {"content", "content_file", "content_parts", "reasoning_content", "reasoning", "tool_calls",
                    "finish_reason", "status", "headers", "body", "delay_s", "usage"});
  Reply reply;
  if (json.contains("content") && json.contains("content_file")) {
    Invalid(field + ".content_file", "give content or content_file, not both");
  }
  if (json.contains("content_parts") && (json.contains("content") || json.contains("content_file"))) {
    Invalid(field + ".content_parts", "give content_parts or content/content_file, not both");
  }
  if (json.contains("content")) {
    if (!json["content"].is_string() && !json["content"].is_null()) {
      Invalid(field + ".content", "must be a string or null");
    }
    reply.content = json["content"];
    if (reply.content.is_string()) reply.words = reply.content.get<std::string>();
  }
  if (json.contains("content_file")) {
    if (!json["content_file"].is_string()) Invalid(field + ".content_file", "must be a string");
    // Read now, so a missing file fails the script, not the request that would have used it.
    reply.words = ReadFileOrThrow(base_dir / json["content_file"].get<std::string>(), field + ".content_file");
    reply.content = reply.words;
  }
  if (json.contains("content_parts")) {
    const Json& parts = json["content_parts"];
    if (!parts.is_array()) Invalid(field + ".content_parts", "must be a list of strings");
    reply.content = Json::array();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].is_string()) Invalid(field + ".content_parts[" + std::to_string(i) + "]", "must be a string");
      reply.content.push_back({{"type", "text"}, {"text", parts[i]}});
      reply.words += "\n" + parts[i].get<std::string>();
    }
  }
  if (json.contains("reasoning_content")) {
    reply.reasoning_content = StringField(json, "reasoning_content", field);
    reply.words += "\n" + *reply.reasoning_content;
  }
  if (json.contains("reasoning")) {
    reply.reasoning = StringField(json, "reasoning", field);
    reply.words += "\n" + *reply.reasoning;
  }
  if (json.contains("tool_calls")) {
    reply.tool_calls = ParseToolCalls(json["tool_calls"], field + ".tool_calls");
    for (const ToolCall& call : *reply.tool_calls) reply.words += "\n" + call.arguments;
  }
  if (json.contains("finish_reason")) reply.finish_reason = StringField(json, "finish_reason", field);
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
    if (usage.is_null()) {
      reply.send_usage = false;
    } else {
      if (!usage.is_object()) Invalid(field + ".usage", "must be a map or null");
      CheckKnownFields(usage, field + ".usage", {"prompt_tokens", "completion_tokens"});
      if (usage.contains("prompt_tokens")) reply.prompt_tokens = TokenCount(usage, "prompt_tokens", field + ".usage");
      if (usage.contains("completion_tokens")) {
        reply.completion_tokens = TokenCount(usage, "completion_tokens", field + ".usage");
      }
    }
  }
  return reply;
}

Endpoint ParseEndpoint(const Json& json) {
  const std::string field = "endpoint";
  if (!json.is_object()) Invalid(field, "must be a map");
  CheckKnownFields(json, field, {"api_key", "reject_fields", "require_fields", "context_window", "models"});
  Endpoint endpoint;
  if (json.contains("api_key")) {
    endpoint.api_key = StringField(json, "api_key", field);
    if (endpoint.api_key->empty()) Invalid(field + ".api_key", "must not be empty");
  }
  if (json.contains("reject_fields")) {
    if (!json["reject_fields"].is_object()) Invalid(field + ".reject_fields", "must be a map of field to message");
    for (const auto& [name, message] : json["reject_fields"].items()) {
      if (!message.is_string()) Invalid(field + ".reject_fields." + name, "must be a string (the error message)");
      endpoint.reject_fields.emplace_back(name, message.get<std::string>());
    }
  }
  if (json.contains("require_fields")) {
    const Json& names = json["require_fields"];
    if (!names.is_array()) Invalid(field + ".require_fields", "must be a list of strings");
    for (size_t i = 0; i < names.size(); ++i) {
      if (!names[i].is_string()) Invalid(field + ".require_fields[" + std::to_string(i) + "]", "must be a string");
      endpoint.require_fields.push_back(names[i].get<std::string>());
    }
  }
  if (json.contains("context_window")) {
    const Json& window = json["context_window"];
    if (!window.is_number_integer() || window.get<int64_t>() <= 0) {
      Invalid(field + ".context_window", "must be a positive integer");
    }
    endpoint.context_window = window.get<int64_t>();
  }
  if (json.contains("models")) {
    const Json& models = json["models"];
    if (!models.is_array()) Invalid(field + ".models", "must be a list of strings");
    endpoint.models.clear();
    for (size_t i = 0; i < models.size(); ++i) {
      if (!models[i].is_string()) Invalid(field + ".models[" + std::to_string(i) + "]", "must be a string");
      endpoint.models.push_back(models[i].get<std::string>());
    }
  }
  return endpoint;
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

// The texts of one message: a string content, or the text parts of a list content.
void AppendMessageTexts(const Json& message, std::vector<std::string>& texts) {
  if (!message.is_object() || !message.contains("content")) return;
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

// The texts of a request's messages.
std::vector<std::string> MessageTexts(const Json& messages) {
  std::vector<std::string> texts;
  for (const Json& message : messages) AppendMessageTexts(message, texts);
  return texts;
}

// UTF-8 code points (bytes that do not continue a sequence).
int64_t Characters(std::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// vLLM-style prompt estimate: per message, ceil(characters / 4).
int64_t PromptTokenEstimate(const Json& messages) {
  int64_t tokens = 0;
  for (const Json& message : messages) {
    std::vector<std::string> texts;
    AppendMessageTexts(message, texts);
    int64_t characters = 0;
    for (const std::string& text : texts) characters += Characters(text);
    tokens += (characters + 3) / 4;
  }
  return tokens;
}

Json ErrorBody(const std::string& message, const std::string& type) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
}

Json InvalidParameter(const std::string& message, const std::string& param, const std::string& code) {
  return {{"error", {{"message", message}, {"type", "invalid_request_error"}, {"param", param}, {"code", code}}}};
}

constexpr const char* kChatPath = "/v1/chat/completions";
constexpr const char* kModelsPath = "/v1/models";

}  // namespace

struct ScriptedServer::Impl {
  std::filesystem::path base_dir;
  std::vector<Rule> rules;            // replies' `next` guarded by mutex
  std::optional<ReplyList> fallback;  // the script's "default"; `next` guarded by mutex
  Endpoint endpoint;

  httplib::Server http;
  std::thread listener;  // runs http.listen_after_bind(); joined by Stop()
  std::string host;
  int port = 0;
  Clock::time_point started;

  mutable std::mutex mutex;
  std::condition_variable stopping_changed;  // wakes replies waiting out delay_s
  bool stopping = false;
  int64_t completions = 0;               // numbers "scripted-N" ids
  int64_t tool_calls = 0;                // numbers "call_N" ids
  int in_flight = 0, max_in_flight = 0;  // chat-completions requests only
  std::vector<ScriptedRequest> log;      // every request, in arrival order; status 0 while being answered

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
    const int64_t completion_tokens = reply.completion_tokens.value_or(static_cast<int64_t>(WordCount(reply.words)));
    int64_t id = 0, first_call = 0;
    {
      std::lock_guard lock(mutex);
      id = ++completions;
      first_call = tool_calls + 1;
      if (reply.tool_calls) tool_calls += static_cast<int64_t>(reply.tool_calls->size());
    }
    Json message = {{"role", "assistant"}, {"content", reply.content}};
    if (reply.reasoning_content) message["reasoning_content"] = *reply.reasoning_content;
    if (reply.reasoning) message["reasoning"] = *reply.reasoning;
    if (reply.tool_calls) {
      Json calls = Json::array();
      for (size_t i = 0; i < reply.tool_calls->size(); ++i) {
        const ToolCall& call = (*reply.tool_calls)[i];
        calls.push_back({{"id", call.id.value_or("call_" + std::to_string(first_call + static_cast<int64_t>(i)))},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    const std::string finish_reason =
        reply.finish_reason.value_or(reply.tool_calls && !reply.tool_calls->empty() ? "tool_calls" : "stop");
    Json completion = {
        {"id", "scripted-" + std::to_string(id)},
        {"object", "chat.completion"},
        {"created", static_cast<int64_t>(std::time(nullptr))},
        {"model", body.contains("model") && body["model"].is_string() ? body["model"] : Json("scripted")},
        {"choices", Json::array({{{"index", 0}, {"message", std::move(message)}, {"finish_reason", finish_reason}}})},
    };
    if (reply.send_usage) {
      completion["usage"] = {{"prompt_tokens", prompt_tokens},
                             {"completion_tokens", completion_tokens},
                             {"total_tokens", prompt_tokens + completion_tokens}};
    }
    res.set_content(completion.dump(), "application/json");
  }

  // The endpoint's api_key check; false: `res` holds the 401.
  bool Authorized(const httplib::Request& req, httplib::Response& res) const {
    if (!endpoint.api_key || req.get_header_value("Authorization") == "Bearer " + *endpoint.api_key) return true;
    res.status = 401;
    res.set_content(Json{{"error",
                          {{"message", "Incorrect API key provided"},
                           {"type", "invalid_request_error"},
                           {"param", nullptr},
                           {"code", "invalid_api_key"}}}}
                        .dump(),
                    "application/json");
    return false;
  }

  // The endpoint's checks of a chat body (a JSON object with "messages"); false: `res` holds the 400.
  bool Admissible(const Json& body, httplib::Response& res) const {
    auto refuse = [&res](const Json& error) {
      res.status = 400;
      res.set_content(error.dump(), "application/json");
      return false;
    };
    for (const auto& [name, message] : endpoint.reject_fields) {
      if (body.contains(name)) return refuse(InvalidParameter(message, name, "unsupported_parameter"));
    }
    for (const std::string& name : endpoint.require_fields) {
      if (!body.contains(name)) {
        return refuse(
            InvalidParameter("Missing required parameter: '" + name + "'.", name, "missing_required_parameter"));
      }
    }
    if (endpoint.context_window) {
      int64_t budget = 0;
      for (const char* name : {"max_completion_tokens", "max_tokens"}) {
        if (!body.contains(name) || body[name].is_null()) continue;
        const Json& value = body[name];
        if (!value.is_number_integer() || value.get<int64_t>() < 0) {
          return refuse(InvalidParameter(std::string(name) + " must be a non-negative integer", name, "invalid_value"));
        }
        budget = value.get<int64_t>();
        break;
      }
      const int64_t prompt = PromptTokenEstimate(body["messages"]);
      const int64_t window = *endpoint.context_window;
      if (prompt + budget > window) {
        return refuse(
            {{"error",
              {{"message", "This model's maximum context length is " + std::to_string(window) +
                               " tokens. However, you requested " + std::to_string(prompt + budget) + " tokens (" +
                               std::to_string(prompt) + " in the messages, " + std::to_string(budget) +
                               " in the completion). Please reduce the length of the messages or completion."},
               {"type", "BadRequestError"},
               {"param", nullptr},
               {"code", 400}}}});
      }
    }
    return true;
  }

  // Logs a request on arrival (to keep arrival order); returns its place in the log.
  size_t LogArrival(const httplib::Request& req, bool chat) {
    std::lock_guard lock(mutex);
    if (chat) max_in_flight = std::max(max_in_flight, ++in_flight);
    log.push_back(ScriptedRequest{Json(), req.get_header_value("Authorization"), 0, Since(Clock::now()), 0, req.method,
                                  req.path});
    return log.size() - 1;
  }

  void LogAnswer(size_t entry, Json body, const httplib::Response& res, bool chat) {
    std::lock_guard lock(mutex);
    if (chat) --in_flight;
    log[entry].body = std::move(body);
    log[entry].status = res.status;
    log[entry].answered_s = Since(Clock::now());
  }

  // A request's body as logged: its JSON, the text it was when it is not JSON, null when empty.
  static Json LoggedBody(const httplib::Request& req) {
    if (req.body.empty()) return nullptr;
    Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    return body.is_discarded() ? Json(req.body) : body;
  }

  void HandleChat(const httplib::Request& req, httplib::Response& res) {
    Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    const size_t entry = LogArrival(req, /*chat=*/true);
    // Everything is caught here: a reply this server cannot build must still come back as HTTP.
    try {
      if (!Authorized(req, res)) {
        // refused: 401
      } else if (body.is_discarded() || !body.is_object() || !body.contains("messages") ||
                 !body["messages"].is_array()) {
        res.status = 400;
        res.set_content(
            ErrorBody("request body must be a JSON object with a \"messages\" array", "invalid_request_error").dump(),
            "application/json");
      } else if (!Admissible(body, res)) {
        // refused: 400
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
    if (body.is_discarded()) body = req.body;  // logged as the text it was
    // Counted out before httplib writes the reply, so a client never holds a reply the server
    // still counts in flight.
    LogAnswer(entry, std::move(body), res, /*chat=*/true);
  }

  void HandleModels(const httplib::Request& req, httplib::Response& res) {
    const size_t entry = LogArrival(req, /*chat=*/false);
    if (Authorized(req, res)) {
      Json data = Json::array();
      for (const std::string& id : endpoint.models) {
        data.push_back({{"id", id}, {"object", "model"}, {"owned_by", "kernelgym"}});
        if (endpoint.context_window) data.back()["max_model_len"] = *endpoint.context_window;  // as vLLM lists it
      }
      res.status = 200;
      res.set_content(Json{{"object", "list"}, {"data", std::move(data)}}.dump(), "application/json");
    }
    LogAnswer(entry, LoggedBody(req), res, /*chat=*/false);
  }

  // Any other method or path (httplib's own 404 has an empty body).
  void HandleUnknown(const httplib::Request& req, httplib::Response& res) {
    const size_t entry = LogArrival(req, /*chat=*/false);
    res.status = 404;
    res.set_content(Json{{"error", {{"message", "Not Found: " + req.path}}}}.dump(), "application/json");
    LogAnswer(entry, LoggedBody(req), res, /*chat=*/false);
  }
};

ScriptedServer::ScriptedServer(nlohmann::json script, std::filesystem::path base_dir)
    : impl_(std::make_unique<Impl>()) {
  impl_->base_dir = std::move(base_dir);
  if (!script.is_object()) Invalid("script", "must be a map with \"rules\" and/or \"default\" (and \"endpoint\")");
  CheckKnownFields(script, "script", {"rules", "default", "endpoint"});
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
  if (script.contains("endpoint")) impl_->endpoint = ParseEndpoint(script["endpoint"]);
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
  // httplib matches the patterns (regular expressions) in the order given: the two endpoints,
  // then every other path of every method answers a JSON 404.
  impl.http.Post(kChatPath,
                 [&impl](const httplib::Request& req, httplib::Response& res) { impl.HandleChat(req, res); });
  impl.http.Get(kModelsPath,
                [&impl](const httplib::Request& req, httplib::Response& res) { impl.HandleModels(req, res); });
  const auto unknown = [&impl](const httplib::Request& req, httplib::Response& res) { impl.HandleUnknown(req, res); };
  impl.http.Get(".*", unknown);
  impl.http.Post(".*", unknown);
  impl.http.Put(".*", unknown);
  impl.http.Patch(".*", unknown);
  impl.http.Delete(".*", unknown);
  impl.http.Options(".*", unknown);
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
  std::vector<ScriptedRequest> chat;
  for (const ScriptedRequest& request : impl_->log) {
    if (request.method == "POST" && request.path == kChatPath) chat.push_back(request);
  }
  return chat;
}

std::vector<ScriptedRequest> ScriptedServer::all_requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->log;
}

int ScriptedServer::max_in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->max_in_flight;
}

}  // namespace kernelgym::llm
