// msgpack <-> protocol messages. The only code that sees msgpack. Decoding never throws and
// never trusts the bytes: every problem becomes an Error naming the op and the field.
#pragma once

#include <string>
#include <string_view>

#include "env/protocol/messages.h"
#include "env/protocol/results.h"

namespace kernelgym::protocol {

struct DecodedRequest {
  std::optional<Request> request;  // on success
  Error error;                     // on failure
  uint64_t id = 0;                 // the request's id when it could be read: the error reply echoes it
  std::string op;                  // the op when it could be read
};

[[nodiscard]] DecodedRequest DecodeRequest(std::string_view bytes);
// The top-level "id" of a msgpack request map of any size that may be malformed elsewhere (0 when
// it has none that can be read): what DecodeRequest answers a refused request with, and what the server
// answers a multi-part message with (its last part).
uint64_t ScanRequestId(std::string_view bytes);
std::string EncodeRequest(const Request& request);

// Replies: {v, id, ok: false, error: {code, message, details}} or {v, id, ok: true, result}.
// The envelope's and the error's keys are packed in the order shown, every map inside `result`
// (and `details`) with its keys in sorted (byte) order: one encoding per value, which the golden
// fixtures pin down.
std::string EncodeErrorReply(uint64_t id, const Error& error);
// A success reply carrying any op's result tree (results.h's ToWire, or a map the op builds).
// Precondition: `result` is a map (object) holding only nil, booleans, numbers, strings, arrays
// and maps.
std::string EncodeResultReply(uint64_t id, const nlohmann::json& result);
// hello's reply: EncodeResultReply(id, ToWire(result)).
std::string EncodeHelloReply(uint64_t id, const HelloResult& result);
// The replies of env.reset and env.step: the same bytes as EncodeResultReply(id, ToWire(result)),
// packed straight from the struct. Every step's reply goes through here, and skipping the
// intermediate tree (a deep copy of the observation's report) is most of the server's per-step cost.
std::string EncodeReply(uint64_t id, const ResetResult& result);
std::string EncodeReply(uint64_t id, const StepResult& result);

struct DecodedReply {
  bool valid = false;
  std::string problem;        // why it is not valid
  uint64_t id = 0;            // 0 when it could not be read
  bool ok = false;
  Error error;                // when !ok
  std::string result;         // when ok: the result map, still msgpack (decoded per op)
};
[[nodiscard]] DecodedReply DecodeReply(std::string_view bytes);

// A DecodedReply's `result` bytes -> the result tree. nullopt, with `problem`, when the bytes
// are not one msgpack map (too large, too deep, a non-string key, a key twice, binary data).
[[nodiscard]] std::optional<nlohmann::json> DecodeResultTree(std::string_view result_bytes, std::string& problem);

// DecodeResultTree + HelloResultFromWire.
[[nodiscard]] std::optional<HelloResult> DecodeHelloResult(std::string_view result, std::string& problem);
[[nodiscard]] std::optional<HelloResult> DecodeHelloResult(std::string_view result);

}  // namespace kernelgym::protocol
