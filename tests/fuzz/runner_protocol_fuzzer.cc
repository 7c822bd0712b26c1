// The runner protocol's decoders (env/protocol/runner_codec.cc) on arbitrary bytes: what a runner
// sends the server (runner.hello, heartbeat, result, whose EvalResult goes through
// core/result_json.h ResultFromJson) and what the server sends a runner (welcome, job, ack,
// reregister). Every input goes to both decoders.
//
// Properties: no crash, leak or UB; a refused message says why and is never "decoding failed"
// (an exception that escaped the codec); an accepted message re-encodes canonically and decodes
// to the same value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "env/protocol/runner_messages.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym::protocol::runner {
namespace {

bool Refusal(const std::string& problem) {
  return !problem.empty() && problem.rfind("decoding failed", 0) != 0;
}

// The accepted message and its round trip, when `bytes` is accepted.
template <typename Message, typename Decode>
std::optional<std::pair<Message, Message>> Check(std::string_view bytes, Decode decode, const char* name) {
  std::string problem;
  std::optional<Message> message = decode(bytes, problem);
  if (!message) {
    FUZZ_CHECK(Refusal(problem), std::string(name) + ": a refusal must be an error value with a message, got '" +
                                     problem + "'");
    return std::nullopt;
  }
  const std::string encoded = Encode(*message);
  std::string again_problem;
  std::optional<Message> again = decode(encoded, again_problem);
  FUZZ_CHECK(again.has_value(), std::string(name) + ": an accepted message re-encodes to bytes it accepts: " +
                                    again_problem);
  FUZZ_CHECK(Encode(*again) == encoded, std::string(name) + ": the encoding is canonical");
  FUZZ_CHECK(again->index() == message->index(), std::string(name) + ": the op survives the round trip");
  return std::pair{std::move(*message), std::move(*again)};
}

}  // namespace
}  // namespace kernelgym::protocol::runner

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym::protocol::runner;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (const auto from = Check<FromRunner>(bytes, DecodeFromRunner, "DecodeFromRunner")) {
    // JobDone has no operator== (an EvalResult may hold NaN); its bytes were compared above.
    if (const auto* hello = std::get_if<RunnerHello>(&from->first))
      FUZZ_CHECK(*hello == std::get<RunnerHello>(from->second), "runner.hello decodes to the same value");
    if (const auto* beat = std::get_if<Heartbeat>(&from->first))
      FUZZ_CHECK(*beat == std::get<Heartbeat>(from->second), "heartbeat decodes to the same value");
  }
  // Every number in a server message is checked finite, so values compare exactly.
  if (const auto to = Check<ToRunner>(bytes, DecodeToRunner, "DecodeToRunner"))
    FUZZ_CHECK(to->first == to->second, "a server message decodes to the same value");
  return 0;
}
