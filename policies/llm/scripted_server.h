// A local HTTP server that speaks the OpenAI chat-completions API and answers from a script, not a
// model (over cpp-httplib). The tests run every LLM policy against it (no test calls a hosted
// API), and `kernelgym-scripted-llm` serves it so anyone can watch the agent work without a model.
//
// A script is JSON:
//   {"rules": [{"match": "text", "replies": [REPLY, ...]}, ...],
//    "default": [REPLY, ...]}
// For each request the first rule whose `match` occurs in any of the request's message contents
// answers (no `match`, or "": every request); a rule's replies are used in order and its last
// reply repeats once the others are spent. A request no rule matches gets the `default` replies
// (same order-then-repeat rule); with no default, HTTP 500 "no scripted reply".
//
// A REPLY is a map; every field is optional:
//   content        the assistant message's text (default "")
//   content_file   read the text from this file instead (relative to the script's folder; read
//                  when the script is loaded; not together with content)
//   finish_reason  default "stop"
//   status         HTTP status (default 200); a non-2xx sends `body` (default an OpenAI-style
//                  {"error": {"message": ...}}) instead of a completion
//   headers        extra response headers, e.g. {"Retry-After": "1"}
//   body           the raw response body, sent as is (to script malformed replies); a
//                  non-string JSON value is sent serialized
//   delay_s        wait this long before answering (to script timeouts and to hold requests in
//                  flight for concurrency tests)
//   usage          {"prompt_tokens": n, "completion_tokens": m}; default: whitespace-split word
//                  counts of the request's messages and of the content
// A rule's `replies` may also be a single REPLY. Unknown fields are errors (they are typos).
//
// Every request is logged (its body as JSON, the reply it got, arrival and answer times); the
// server also tracks the most requests it was answering at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kernelgym::llm {

struct ScriptedRequest {
  nlohmann::json body;       // the request as sent (model, messages, temperature, ...)
  std::string authorization;  // the Authorization header, "" if none
  int status = 0;             // the HTTP status it was answered with
  double arrived_s = 0, answered_s = 0;  // seconds since the server started
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

  std::vector<ScriptedRequest> requests() const;  // in arrival order; status 0: still being answered
  int max_in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelgym::llm
