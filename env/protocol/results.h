// The results of the client ops as plain C++ types, with their wire form (a JSON-like tree that
// the codec packs as msgpack; docs/protocol.md lists every field). Server and clients both use
// these, so a field is named in exactly one place.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/backend_info.h"
#include "env/protocol/messages.h"

namespace kernelgym::protocol {

// hello: what this server offers. Clients read `feature_names` to interpret
// Observation::features, and the defaults to know what an env.make with 0 limits gets.
struct HelloResult {
  int protocol = kVersion;
  std::string server;                      // "kernelgym <version>"
  std::vector<std::string> backends;       // with at least one connected runner
  std::vector<BackendInfo> backend_info;   // the descriptor of each of `backends`, in that order
  std::vector<std::string> rewards;
  std::vector<std::string> action_kinds;
  std::vector<std::string> feature_names;  // Observation::features[i] is feature_names[i]
  int64_t default_max_steps = 0;           // what env.make's max_steps = 0 means
  double default_time_budget_s = 0;        // what env.make's time_budget_s = 0 means
  uint64_t max_message_bytes = 0;          // the largest request the server accepts
  // The server process's id, random per start: a client that sees it change knows the server
  // restarted (its envs and in-flight steps are gone). "" from a server that does not send it.
  std::string instance;
  bool operator==(const HelloResult&) const = default;
};

// env.make and env.fork: the new env and the limits it runs under.
struct EnvInfo {
  std::string env;
  std::string task;
  std::string backend;
  std::string reward;
  double reward_min = 0, reward_max = 0;  // the reward's declared range
  int64_t max_steps = 0;
  double time_budget_s = 0;  // seconds of evaluation (runner time) the episode may use
  bool record = false;
  std::string instance;  // the server process that holds the env (HelloResult::instance)
  bool operator==(const EnvInfo&) const = default;
};

// What a policy sees after reset and after every step.
struct Observation {
  int64_t step = 0;            // 0 after reset
  std::string status;          // the evaluation's status (docs/results.md), "invalid_action" when the
                               // action could not be applied
  std::string stage;           // the last stage the evaluation entered
  std::string message;         // one line: why this status
  std::string action_error;    // why the action could not be applied ("" when it was)
  bool reused = false;         // the source was unchanged: the earlier evaluation is re-used
  double speedup = 0;          // over the reference; 0 unless status is ok
  double speedup_ci_low = 0, speedup_ci_high = 0;
  double best_speedup = 0;     // best correct speedup in this episode so far (the starter's included)
  int64_t steps_left = 0;
  double seconds_left = 0;
  std::string source;          // the current kernel source (after the action)
  nlohmann::json report;       // the whole evaluation record (docs/results.md), without raw samples
  std::string text;            // Markdown rendering for language models
  std::vector<double> features;  // fixed length; the layout is hello's `feature_names`
  bool operator==(const Observation&) const = default;
};

struct ResetResult {
  Observation observation;
  nlohmann::json info = nlohmann::json::object();  // seed, runner, eval_seconds, ...
  bool operator==(const ResetResult&) const = default;
};

struct StepResult {
  Observation observation;
  double reward = 0;
  bool terminated = false;  // submit: the episode reached its end
  bool truncated = false;   // step or time budget spent
  nlohmann::json info = nlohmann::json::object();  // outcome, reused, runner, eval_seconds, attempts, ...
  bool operator==(const StepResult&) const = default;
};

// health: what a liveness/readiness probe and a client-side router need, cheap to compute and
// answered even while the server drains. `status` is "ok" or "draining" (SIGTERM received: no
// new work is accepted); a reader treats any other value as not ok.
struct HealthResult {
  std::string status = "ok";
  double uptime_s = 0;
  uint64_t sessions = 0;                   // open envs
  std::map<std::string, int64_t> runners;  // backend -> connected runners serving it
  uint64_t queued = 0;                     // evaluations waiting for a runner
  uint64_t running = 0;                    // evaluations on a runner now
  std::string instance;                    // as HelloResult::instance
  bool operator==(const HealthResult&) const = default;
};

// The wire tree of a result: a map whose keys are the struct's field names (docs/protocol.md).
// The codec packs it with keys in sorted order, so one value has exactly one encoding.
nlohmann::json ToWire(const HelloResult& hello);
nlohmann::json ToWire(const EnvInfo& info);
nlohmann::json ToWire(const Observation& observation);
nlohmann::json ToWire(const ResetResult& result);
nlohmann::json ToWire(const StepResult& result);
nlohmann::json ToWire(const HealthResult& health);

// Reading a result back (clients). Strict about the fields they know: a missing or wrongly typed
// field gives nullopt and a `problem` naming it ("field 'observation.speedup' must be a number,
// not a string"). Fields they do not know are ignored, so that a newer server may add fields
// without breaking older clients. Integers are accepted where a number is expected.
std::optional<HelloResult> HelloResultFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<EnvInfo> EnvInfoFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<Observation> ObservationFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<ResetResult> ResetResultFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<StepResult> StepResultFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<HealthResult> HealthResultFromWire(const nlohmann::json& wire, std::string& problem);

}  // namespace kernelgym::protocol
