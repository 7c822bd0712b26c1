// The client protocol's messages as plain C++ types (docs/protocol.md is the contract). msgpack
// never leaves this folder: the codec (codec.h) turns bytes into these types and back.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kernelgym::protocol {

inline constexpr int kVersion = 1;
inline constexpr std::size_t kMaxMessageBytes = std::size_t{8} << 20;

// One enum on the wire (as its name, e.g. "UNKNOWN_ENV"), mirrored as typed exceptions in the
// Python client.
enum class ErrorCode {
  kBadRequest,          // malformed bytes, wrong types, missing or unknown fields, too large
  kUnsupportedVersion,  // `v` is not a version this server speaks
  kUnknownOp,
  kUnknownEnv,
  kUnknownTask,
  kUnknownReward,
  kUnknownBackend,
  kInvalidAction,  // an action that cannot be applied (in env.step it is an observation instead)
  kEnvBusy,        // the env already has a reset or step in flight: wait for its reply
  kEpisodeOver,    // env.step before env.reset, or after the episode terminated or was truncated
  kNoRunner,       // no connected runner serves the backend
  kRunnerLost,     // the runner died and the retries are spent
  kOverloaded,     // queues full: retry after `details.retry_after_s`
  kInternal,
  // The env was made by an earlier process of this server (it restarted: its envs are gone), or a
  // client saw the server's instance change while the request was in flight (docs/protocol.md).
  kServerRestarted,
};

std::string_view ErrorCodeName(ErrorCode code);
std::optional<ErrorCode> ParseErrorCode(std::string_view name);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::map<std::string, std::string> details;
  bool operator==(const Error&) const = default;
};

// ---- actions (the `action` of env.step) ----
struct ReplaceAction {
  std::string source;
  bool operator==(const ReplaceAction&) const = default;
};
struct EditBlock {
  std::string search, replace;
  bool operator==(const EditBlock&) const = default;
};
struct EditAction {
  std::vector<EditBlock> edits;
  bool operator==(const EditAction&) const = default;
};
struct PatchAction {
  std::string diff;  // unified diff against the current source
  bool operator==(const PatchAction&) const = default;
};
using KnobValue = std::variant<int64_t, double, std::string>;
struct KnobsAction {
  std::map<std::string, KnobValue> values;
  bool operator==(const KnobsAction&) const = default;
};
struct RevertAction {
  int64_t to_step = 0;
  bool operator==(const RevertAction&) const = default;
};
struct SubmitAction {
  bool operator==(const SubmitAction&) const = default;
};
using Action = std::variant<ReplaceAction, EditAction, PatchAction, KnobsAction, RevertAction, SubmitAction>;
std::string_view ActionKind(const Action& action);
// The action as a JSON map, the form the trajectory store records and docs/protocol.md shows:
// {"kind": "replace", "source": ...}, {"kind": "edit", "edits": [{"search", "replace"}]}, ...
nlohmann::json ActionToJson(const Action& action);
// A knob value as JSON (a number or a string) and back; nullopt for any other JSON, and for an
// integer past int64's range (it is refused, not wrapped).
nlohmann::json KnobValueToJson(const KnobValue& value);
std::optional<KnobValue> KnobValueFromJson(const nlohmann::json& json);
// As a person or a template writes it: 64, 0.5, exp_poly.
std::string KnobValueText(const KnobValue& value);
// "A=1,B=std::exp" (the command lines' form of a knobs action) -> the values: integers where the
// text is one, else tokens; the task's domains are checked where the action is applied. nullopt
// for an empty list or an item that is not NAME=value.
std::optional<std::map<std::string, KnobValue>> ParseKnobList(std::string_view text);

// ---- requests ----
struct HelloRequest {
  bool operator==(const HelloRequest&) const = default;
};
struct TasksListRequest {
  std::string suite;  // empty: all
  bool operator==(const TasksListRequest&) const = default;
};
struct TasksGetRequest {
  std::string task;
  bool operator==(const TasksGetRequest&) const = default;
};
struct EnvMakeRequest {
  std::string task;
  std::string backend = "cpu";
  std::string reward = "log_speedup_gain";
  nlohmann::json reward_config = nlohmann::json::object();  // the reward's own config (JSON-like map)
  int64_t max_steps = 0;     // 0: the server's default
  double time_budget_s = 0;  // 0: the server's default
  bool record = false;
  bool operator==(const EnvMakeRequest&) const = default;
};
struct EnvResetRequest {
  std::string env;
  std::optional<uint64_t> seed;  // none: the server draws one
  bool operator==(const EnvResetRequest&) const = default;
};
struct EnvStepRequest {
  std::string env;
  Action action;
  // What the policy wants kept with this step in the trajectory store, e.g. an LLM policy's
  // prompts and completions (docs/dataset.md, "meta"). A map; the server never reads it, only
  // records it (when the env records) — so prompts become SFT data next to the outcome they led to.
  nlohmann::json meta = nlohmann::json::object();
  bool operator==(const EnvStepRequest&) const = default;
};
struct EnvForkRequest {
  std::string env;
  bool operator==(const EnvForkRequest&) const = default;
};
struct EnvCloseRequest {
  std::string env;
  bool operator==(const EnvCloseRequest&) const = default;
};
struct StatsRequest {
  bool operator==(const StatsRequest&) const = default;
};
// For probes and routers: is the server up, serving or draining, how loaded (HealthResult).
struct HealthRequest {
  bool operator==(const HealthRequest&) const = default;
};

using RequestBody = std::variant<HelloRequest, TasksListRequest, TasksGetRequest, EnvMakeRequest, EnvResetRequest,
                                 EnvStepRequest, EnvForkRequest, EnvCloseRequest, StatsRequest, HealthRequest>;
std::string_view OpName(const RequestBody& body);
// Every op of the protocol, in RequestBody's order; IsKnownOp: `op` is one of them.
const std::vector<std::string_view>& OpNames();
bool IsKnownOp(std::string_view op);

struct Request {
  int v = kVersion;
  uint64_t id = 0;  // chosen by the client; echoed in the reply (replies may come out of order)
  RequestBody body;
  bool operator==(const Request&) const = default;
};

}  // namespace kernelgym::protocol
