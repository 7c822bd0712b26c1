// msgpack <-> protocol messages. The only code that sees msgpack. Decoding never throws and
// never trusts the bytes: every problem becomes an Error naming the op and the field.
#pragma once

#include <string>
#include <string_view>

#include "env/protocol/messages.h"

namespace kernelgym::protocol {

struct DecodedRequest {
  std::optional<Request> request;  // on success
  Error error;                     // on failure
  uint64_t id = 0;                 // the request's id when it could be read: the error reply echoes it
  std::string op;                  // the op when it could be read
};

[[nodiscard]] DecodedRequest DecodeRequest(std::string_view bytes);
std::string EncodeRequest(const Request& request);

// Replies: {v, id, ok: false, error: {code, message, details}} or {v, id, ok: true, result}.
std::string EncodeErrorReply(uint64_t id, const Error& error);

struct HelloResult {
  int protocol = kVersion;
  std::string server;                 // "kernelgym <version>"
  std::vector<std::string> backends;  // with at least one connected runner
  std::vector<std::string> rewards;
  std::vector<std::string> action_kinds;
  bool operator==(const HelloResult&) const = default;
};
std::string EncodeHelloReply(uint64_t id, const HelloResult& result);

struct DecodedReply {
  bool valid = false;
  std::string problem;        // why it is not valid
  uint64_t id = 0;
  bool ok = false;
  Error error;                // when !ok
  std::string result;         // when ok: the result map, still msgpack (decoded per op)
};
[[nodiscard]] DecodedReply DecodeReply(std::string_view bytes);
[[nodiscard]] std::optional<HelloResult> DecodeHelloResult(std::string_view result);

}  // namespace kernelgym::protocol
