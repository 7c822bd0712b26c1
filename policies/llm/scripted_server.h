// A local HTTP server that speaks the OpenAI chat-completions API and answers from a script, not a
// model (over cpp-httplib). The tests run every LLM policy against it (no test calls a hosted
// API), and `kernelgym-scripted-llm` serves it so anyone can watch the agent work without a model.
//
// A script is JSON:
//   {"rules": [{"match": "text", "replies": [REPLY, ...]}, ...],
//    "default": [REPLY, ...],
//    "endpoint": ENDPOINT}
// For each request the first rule whose `match` occurs in any of the request's message contents
// answers (no `match`, or "": every request); a rule's replies are used in order and its last
// reply repeats once the others are spent. A request no rule matches gets the `default` replies
// (same order-then-repeat rule); with no default, HTTP 500 "no scripted reply".
//
// A REPLY is a map; every field is optional:
//   content        the assistant message's text (default ""); JSON null sends "content": null
//   content_file   read the text from this file instead (relative to the script's folder; read
//                  when the script is loaded; not together with content)
//   content_parts  a list of strings, sent as the content in parts: [{"type": "text", "text": s},
//                  ...] (not together with content or content_file)
//   reasoning_content  a string sent as message.reasoning_content (vLLM, SGLang, DeepSeek)
//   reasoning      a string sent as message.reasoning (OpenRouter, newer vLLM)
//   tool_calls     a list of {"name": string, "arguments": string or map, "id": string}, sent as
//                  message.tool_calls [{"id": ..., "type": "function", "function": {"name": ...,
//                  "arguments": "<JSON text>"}}]; `name` is required; `arguments` defaults to
//                  "{}", a map is sent serialized (as the API does), a string byte for byte (so
//                  malformed arguments can be scripted); `id` defaults to "call_N", N the call's
//                  place among all tool calls this server has sent (from 1; calls with a scripted
//                  id count too). [] sends "tool_calls": [].
//   finish_reason  default "tool_calls" when tool_calls is not empty, else "stop"
//   status         HTTP status (default 200); a non-2xx sends `body` (default an OpenAI-style
//                  {"error": {"message": ...}}) instead of a completion
//   headers        extra response headers, e.g. {"Retry-After": "1"}
//   body           the raw response body, sent as is (to script malformed replies); a
//                  non-string JSON value is sent serialized
//   delay_s        wait this long before answering (to script timeouts and to hold requests in
//                  flight for concurrency tests)
//   usage          {"prompt_tokens": n, "completion_tokens": m}; a missing count (or no usage at
//                  all) defaults to whitespace-split word counts: of the request's message texts,
//                  and of what the reply sends (content or content_parts, reasoning_content,
//                  reasoning and the tool calls' arguments). usage: null sends no "usage" field.
// A rule's `replies` may also be a single REPLY. Unknown fields are errors (they are typos).
//
// ENDPOINT (optional; every field optional) imitates a real server's checks. They run on every
// chat-completions request (api_key on GET /v1/models too), before the rules, in this order; a
// refused request is logged with its status:
//   api_key         a request (chat or models) whose Authorization header is not exactly
//                   "Bearer <api_key>" gets HTTP 401 {"error": {"message": "Incorrect API key
//                   provided", "type": "invalid_request_error", "param": null, "code":
//                   "invalid_api_key"}}
//   (then a chat body that is not a JSON object with a "messages" list gets 400, as always)
//   reject_fields   {field: message}: a chat body with that top-level field gets 400 {"error":
//                   {"message": message, "type": "invalid_request_error", "param": field, "code":
//                   "unsupported_parameter"}} (fields checked in name order)
//   require_fields  [field, ...]: a chat body missing one gets 400 {"error": {"message": "Missing
//                   required parameter: '<field>'.", "type": "invalid_request_error", "param":
//                   field, "code": "missing_required_parameter"}} (the first missing, list order)
//   context_window  N > 0, as vLLM: prompt tokens P = sum over messages of ceil(characters of the
//                   message's text / 4) (characters: UTF-8 code points; text: a string content or
//                   the text parts of a list content); completion budget C = max_completion_tokens
//                   if the body has it, else max_tokens, else 0 (null counts as absent; a value
//                   that is not a non-negative integer gets 400 naming it). P + C > N gets 400
//                   {"error": {"message": "This model's maximum context length is N tokens.
//                   However, you requested P+C tokens (P in the messages, C in the completion).
//                   Please reduce the length of the messages or completion.", "type":
//                   "BadRequestError", "param": null, "code": 400}}
//   models          the model ids GET /v1/models lists (default ["scripted"])
//
// Paths: POST /v1/chat/completions answers from the script; GET /v1/models answers {"object":
// "list", "data": [{"id": id, "object": "model", "owned_by": "kernelgym"}, ...]}, each entry with
// "max_model_len": N when the endpoint has a context_window (as vLLM lists it) (after the
// api_key check); any other method or path (POST /chat/completions too: a base URL without /v1)
// gets 404 {"error": {"message": "Not Found: <path>"}}.
//
// Every request is logged (method, path, its body as JSON, the reply's status, arrival and answer
// times): requests() lists the chat-completions requests only (what the policies' tests count),
// all_requests() every request. The server also tracks the most chat-completions requests it was
// answering at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kernelgym::llm {

struct ScriptedRequest {
  nlohmann::json body;                   // the request as sent (model, messages, temperature, ...)
  std::string authorization;             // the Authorization header, "" if none
  int status = 0;                        // the HTTP status it was answered with
  double arrived_s = 0, answered_s = 0;  // seconds since the server started
  std::string method;                    // "GET", "POST", ...
  std::string path;                      // e.g. "/v1/chat/completions", "/v1/models" (no query string)
};

class ScriptedServer {
 public:
  // `script` as above; `base_dir` resolves content_file. Throws std::invalid_argument naming the
  // field when the script is malformed (checked here, not at the first request).
  ScriptedServer(nlohmann::json script, std::filesystem::path base_dir = ".");
  static std::unique_ptr<ScriptedServer> FromFile(const std::filesystem::path& script_file);
  ~ScriptedServer();  // stops the server
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  // Binds host:port (port 0: any free port) and serves on a background thread. Returns the port;
  // throws std::runtime_error when it cannot bind.
  int Start(const std::string& host = "127.0.0.1", int port = 0);
  void Stop();
  std::string base_url() const;  // "http://127.0.0.1:PORT/v1"

  // In arrival order; status 0: still being answered. requests(): POST /v1/chat/completions only
  // (refused ones included); all_requests(): every request, GET /v1/models and 404s included.
  std::vector<ScriptedRequest> requests() const;
  std::vector<ScriptedRequest> all_requests() const;
  int max_in_flight() const;  // chat-completions requests only

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelgym::llm
