// The server's request decoder (env/protocol/codec.h DecodeRequest) on arbitrary bytes: what a
// hostile or broken client can send to `kernelgym serve`.
//
// Properties: decoding never crashes, leaks or hits UB; a refused request is an error value with
// a message and never INTERNAL (that code means an exception escaped the codec: a codec bug); the
// error reply the server would send for it decodes back to the same error; an accepted request
// re-encodes canonically (encode -> decode -> encode gives the same bytes) and decodes to the same
// value.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "env/protocol/codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym::protocol {
namespace {

bool HasNaN(const nlohmann::json& j) {
  if (j.is_number_float()) return std::isnan(j.get<double>());
  if (j.is_structured())
    for (const nlohmann::json& e : j)
      if (HasNaN(e)) return true;
  return false;
}

// NaN != NaN, so a request holding one cannot compare equal to itself; its bytes still must.
bool HasNaN(const Request& r) {
  if (const auto* make = std::get_if<EnvMakeRequest>(&r.body)) return HasNaN(make->reward_config);
  if (const auto* step = std::get_if<EnvStepRequest>(&r.body)) {
    if (HasNaN(step->meta)) return true;
    if (const auto* knobs = std::get_if<KnobsAction>(&step->action))
      for (const auto& [name, value] : knobs->values)
        if (const auto* d = std::get_if<double>(&value); d && std::isnan(*d)) return true;
  }
  return false;
}

void CheckErrorReplyRoundTrip(uint64_t id, const Error& error) {
  const DecodedReply reply = DecodeReply(EncodeErrorReply(id, error));
  FUZZ_CHECK(reply.valid, "the error reply for a refused request must decode: " + reply.problem);
  FUZZ_CHECK(!reply.ok && reply.id == id, "the error reply keeps ok=false and the request's id");
  FUZZ_CHECK(reply.error == error, "the error reply decodes to the same error: " + error.message);
}

}  // namespace
}  // namespace kernelgym::protocol

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym::protocol;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const DecodedRequest decoded = DecodeRequest(bytes);
  if (!decoded.request) {
    FUZZ_CHECK(!decoded.error.message.empty(), "a refused request says why");
    FUZZ_CHECK(decoded.error.code != ErrorCode::kInternal, "an exception escaped the codec: " + decoded.error.message);
    CheckErrorReplyRoundTrip(decoded.id, decoded.error);
    return 0;
  }
  const Request& request = *decoded.request;
  FUZZ_CHECK(decoded.op == OpName(request.body), "op '" + decoded.op + "' decoded as " + std::string(OpName(request.body)));
  FUZZ_CHECK(decoded.id == request.id, "the envelope's id is the request's");

  const std::string encoded = EncodeRequest(request);
  const DecodedRequest again = DecodeRequest(encoded);
  FUZZ_CHECK(again.request.has_value(), "an accepted request re-encodes to bytes it accepts: " + again.error.message);
  FUZZ_CHECK(EncodeRequest(*again.request) == encoded, "the encoding is canonical (encode-decode-encode is stable)");
  if (!HasNaN(request)) FUZZ_CHECK(*again.request == request, "the re-encoded request decodes to the same value");
  return 0;
}
