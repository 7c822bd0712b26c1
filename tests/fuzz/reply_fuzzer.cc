// What a client reads (env/protocol/codec.h DecodeReply, DecodeResultTree, and the results.h and
// task_info.h *FromWire readers, health's and tasks.get's included) on arbitrary bytes: a broken or hostile server must not
// crash a policy.
//
// Properties: no crash, leak or UB; an invalid reply says why; an error reply re-encodes to the
// same error; a result tree re-encodes canonically and decodes to the same tree; every reader that
// accepts the tree gives a value whose wire form reads back to the same value; and the packed
// replies of env.reset and env.step (EncodeReply) are byte for byte EncodeResultReply of their
// wire tree, as codec.h promises.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "env/protocol/codec.h"
#include "env/protocol/task_info.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym::protocol {
namespace {

using nlohmann::json;

bool HasNaN(const json& j) {
  if (j.is_number_float()) return std::isnan(j.get<double>());
  if (j.is_structured())
    for (const json& e : j)
      if (HasNaN(e)) return true;
  return false;
}

// The bytes a result tree travels as: msgpack, keys in sorted order, one encoding per value.
std::string Packed(const json& tree) { return EncodeResultReply(0, tree); }

// A reader's accepted value, written back to the wire and read again, is the same value.
template <typename T, typename Reader>
std::optional<T> CheckReader(const json& tree, Reader read, const char* name) {
  std::string problem;
  std::optional<T> value = read(tree, problem);
  if (!value) {
    FUZZ_CHECK(!problem.empty(), std::string(name) + " refused the tree without saying why");
    return std::nullopt;
  }
  const json wire = ToWire(*value);
  std::string again_problem;
  const std::optional<T> again = read(wire, again_problem);
  FUZZ_CHECK(again.has_value(), std::string(name) + " refuses its own wire form: " + again_problem);
  FUZZ_CHECK(Packed(ToWire(*again)) == Packed(wire), std::string(name) + ": wire form is not stable");
  if (!HasNaN(wire)) FUZZ_CHECK(*again == *value, std::string(name) + ": wire form reads back to another value");
  return value;
}

void CheckResultTree(uint64_t id, const std::string& result_bytes) {
  std::string problem;
  const std::optional<json> tree = DecodeResultTree(result_bytes, problem);
  if (!tree) {
    FUZZ_CHECK(!problem.empty(), "DecodeResultTree refused without saying why");
    return;
  }
  FUZZ_CHECK(tree->is_object(), "a result tree is a map");
  const std::string encoded = EncodeResultReply(id, *tree);
  const DecodedReply reply = DecodeReply(encoded);
  FUZZ_CHECK(reply.valid && reply.ok && reply.id == id, "a re-encoded result reply decodes: " + reply.problem);
  const std::optional<json> again = DecodeResultTree(reply.result, problem);
  FUZZ_CHECK(again.has_value(), "a re-encoded result tree decodes: " + problem);
  FUZZ_CHECK(EncodeResultReply(id, *again) == encoded, "the result encoding is canonical");
  if (!HasNaN(*tree)) FUZZ_CHECK(*again == *tree, "the result tree decodes to the same tree");

  CheckReader<HelloResult>(*tree, HelloResultFromWire, "HelloResultFromWire");
  CheckReader<EnvInfo>(*tree, EnvInfoFromWire, "EnvInfoFromWire");
  CheckReader<Observation>(*tree, ObservationFromWire, "ObservationFromWire");
  if (const auto reset = CheckReader<ResetResult>(*tree, ResetResultFromWire, "ResetResultFromWire"))
    FUZZ_CHECK(EncodeReply(id, *reset) == EncodeResultReply(id, ToWire(*reset)),
               "EncodeReply(ResetResult) differs from EncodeResultReply of its wire tree");
  if (const auto step = CheckReader<StepResult>(*tree, StepResultFromWire, "StepResultFromWire"))
    FUZZ_CHECK(EncodeReply(id, *step) == EncodeResultReply(id, ToWire(*step)),
               "EncodeReply(StepResult) differs from EncodeResultReply of its wire tree");
  CheckReader<HealthResult>(*tree, HealthResultFromWire, "HealthResultFromWire");
  CheckReader<TaskSummary>(*tree, TaskSummaryFromWire, "TaskSummaryFromWire");
  CheckReader<TaskInfo>(*tree, TaskInfoFromWire, "TaskInfoFromWire");
  if (const auto hello = DecodeHelloResult(reply.result))
    FUZZ_CHECK(EncodeHelloReply(id, *hello) == EncodeResultReply(id, ToWire(*hello)), "EncodeHelloReply");
}

}  // namespace
}  // namespace kernelgym::protocol

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym::protocol;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const DecodedReply reply = DecodeReply(bytes);
  if (!reply.valid) {
    FUZZ_CHECK(!reply.problem.empty(), "an invalid reply says why");
    return 0;
  }
  if (!reply.ok) {
    const DecodedReply again = DecodeReply(EncodeErrorReply(reply.id, reply.error));
    FUZZ_CHECK(again.valid && !again.ok && again.id == reply.id, "a re-encoded error reply decodes: " + again.problem);
    FUZZ_CHECK(again.error == reply.error, "a re-encoded error reply keeps its error");
    return 0;
  }
  CheckResultTree(reply.id, reply.result);
  return 0;
}
