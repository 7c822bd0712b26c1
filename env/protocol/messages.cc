#include "env/protocol/messages.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <array>
#include <utility>

namespace kernelgym::protocol {
namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 15> kCodes{{
    {ErrorCode::kBadRequest, "BAD_REQUEST"},
    {ErrorCode::kUnsupportedVersion, "UNSUPPORTED_VERSION"},
    {ErrorCode::kUnknownOp, "UNKNOWN_OP"},
    {ErrorCode::kUnknownEnv, "UNKNOWN_ENV"},
    {ErrorCode::kUnknownTask, "UNKNOWN_TASK"},
    {ErrorCode::kUnknownReward, "UNKNOWN_REWARD"},
    {ErrorCode::kUnknownBackend, "UNKNOWN_BACKEND"},
    {ErrorCode::kInvalidAction, "INVALID_ACTION"},
    {ErrorCode::kEnvBusy, "ENV_BUSY"},
    {ErrorCode::kEpisodeOver, "EPISODE_OVER"},
    {ErrorCode::kNoRunner, "NO_RUNNER"},
    {ErrorCode::kRunnerLost, "RUNNER_LOST"},
    {ErrorCode::kOverloaded, "OVERLOADED"},
    {ErrorCode::kInternal, "INTERNAL"},
    {ErrorCode::kServerRestarted, "SERVER_RESTARTED"},
}};

}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  for (const auto& [c, name] : kCodes)
    if (c == code) return name;
  return "INTERNAL";
}

std::optional<ErrorCode> ParseErrorCode(std::string_view name) {
  for (const auto& [c, n] : kCodes)
    if (n == name) return c;
  return std::nullopt;
}

std::string_view ActionKind(const Action& action) {
  static constexpr std::string_view kKinds[] = {"replace", "edit", "patch", "knobs", "revert", "submit"};
  return kKinds[action.index()];
}

const std::vector<std::string_view>& OpNames() {
  static const std::vector<std::string_view> ops = {"hello",    "tasks.list", "tasks.get", "env.make", "env.reset",
                                                    "env.step", "env.fork",   "env.close", "stats",    "health"};
  return ops;
}

std::string_view OpName(const RequestBody& body) { return OpNames()[body.index()]; }

bool IsKnownOp(std::string_view op) {
  const std::vector<std::string_view>& ops = OpNames();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

nlohmann::json ActionToJson(const Action& action) {
  nlohmann::json j{{"kind", std::string(ActionKind(action))}};
  if (const auto* a = std::get_if<ReplaceAction>(&action)) {
    j["source"] = a->source;
  } else if (const auto* a = std::get_if<EditAction>(&action)) {
    j["edits"] = nlohmann::json::array();
    for (const auto& b : a->edits) j["edits"].push_back({{"search", b.search}, {"replace", b.replace}});
  } else if (const auto* a = std::get_if<PatchAction>(&action)) {
    j["diff"] = a->diff;
  } else if (const auto* a = std::get_if<KnobsAction>(&action)) {
    j["values"] = nlohmann::json::object();
    for (const auto& [name, value] : a->values) j["values"][name] = KnobValueToJson(value);
  } else if (const auto* a = std::get_if<RevertAction>(&action)) {
    j["to_step"] = a->to_step;
  }
  return j;
}

std::optional<std::map<std::string, KnobValue>> ParseKnobList(std::string_view text) {
  std::map<std::string, KnobValue> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item(text.substr(start, comma - start));
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) return std::nullopt;
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (*end == '\0') values[name] = static_cast<int64_t>(number);
    else values[name] = value;
    start = comma + 1;
  }
  return values;
}

nlohmann::json KnobValueToJson(const KnobValue& value) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, value);
}

std::optional<KnobValue> KnobValueFromJson(const nlohmann::json& json) {
  // An unsigned past int64's range is no knob value (get<int64_t> would wrap it to a negative one).
  if (json.is_number_unsigned() && json.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  if (json.is_number_integer()) return KnobValue{json.get<int64_t>()};
  if (json.is_number_float()) return KnobValue{json.get<double>()};
  if (json.is_string()) return KnobValue{json.get<std::string>()};
  return std::nullopt;
}

std::string KnobValueText(const KnobValue& value) {
  return std::visit(
      [](const auto& v) {
        std::ostringstream s;
        s << v;
        return s.str();
      },
      value);
}

}  // namespace kernelgym::protocol
