#include "env/protocol/results.h"

#include <limits>

#include "env/protocol/wire_reader.h"

namespace kernelgym::protocol {
namespace {

using nlohmann::json;
using wire::BadField;
using wire::Guarded;
using wire::Reader;

Observation ReadObservation(const Reader& r) {
  Observation o;
  o.step = r.Int("step");
  o.status = r.String("status");
  o.stage = r.String("stage");
  o.message = r.String("message");
  o.action_error = r.String("action_error");
  o.reused = r.Bool("reused");
  o.speedup = r.Number("speedup");
  o.speedup_ci_low = r.Number("speedup_ci_low");
  o.speedup_ci_high = r.Number("speedup_ci_high");
  o.best_speedup = r.Number("best_speedup");
  o.steps_left = r.Int("steps_left");
  o.seconds_left = r.Number("seconds_left");
  o.source = r.String("source");
  // nil when there is no evaluation record to show; otherwise the record's map.
  const json& report = r.Require("report");
  if (!report.is_null()) o.report = r.Map("report");
  o.text = r.String("text");
  o.features = r.Numbers("features");
  return o;
}

json BackendInfoWire(const std::vector<BackendInfo>& infos) {
  json out = json::array();
  for (const BackendInfo& info : infos) out.push_back(ToJson(info));
  return out;
}

}  // namespace

json ToWire(const HelloResult& hello) {
  return {{"protocol", hello.protocol},
          {"server", hello.server},
          {"backends", hello.backends},
          {"backend_info", BackendInfoWire(hello.backend_info)},
          {"rewards", hello.rewards},
          {"action_kinds", hello.action_kinds},
          {"feature_names", hello.feature_names},
          {"default_max_steps", hello.default_max_steps},
          {"default_time_budget_s", hello.default_time_budget_s},
          {"max_message_bytes", hello.max_message_bytes},
          {"instance", hello.instance}};
}

json ToWire(const EnvInfo& info) {
  return {{"env", info.env},
          {"task", info.task},
          {"backend", info.backend},
          {"reward", info.reward},
          {"reward_min", info.reward_min},
          {"reward_max", info.reward_max},
          {"max_steps", info.max_steps},
          {"time_budget_s", info.time_budget_s},
          {"record", info.record},
          {"instance", info.instance}};
}

json ToWire(const Observation& o) {
  return {{"step", o.step},
          {"status", o.status},
          {"stage", o.stage},
          {"message", o.message},
          {"action_error", o.action_error},
          {"reused", o.reused},
          {"speedup", o.speedup},
          {"speedup_ci_low", o.speedup_ci_low},
          {"speedup_ci_high", o.speedup_ci_high},
          {"best_speedup", o.best_speedup},
          {"steps_left", o.steps_left},
          {"seconds_left", o.seconds_left},
          {"source", o.source},
          {"report", o.report},
          {"text", o.text},
          {"features", o.features}};
}

json ToWire(const ResetResult& result) { return {{"observation", ToWire(result.observation)}, {"info", result.info}}; }

json ToWire(const StepResult& result) {
  return {{"observation", ToWire(result.observation)},
          {"reward", result.reward},
          {"terminated", result.terminated},
          {"truncated", result.truncated},
          {"info", result.info}};
}

json ToWire(const HealthResult& health) {
  return {{"status", health.status},    {"uptime_s", health.uptime_s}, {"sessions", health.sessions},
          {"runners", health.runners},  {"queued", health.queued},     {"running", health.running},
          {"instance", health.instance}};
}

std::optional<HelloResult> HelloResultFromWire(const json& wire, std::string& problem) {
  return Guarded<HelloResult>(problem, [&] {
    const Reader r(wire, "");
    HelloResult h;
    const int64_t protocol = r.Int("protocol");
    if (protocol < 0 || protocol > std::numeric_limits<int>::max()) throw BadField{"field 'protocol' is out of range"};
    h.protocol = static_cast<int>(protocol);
    h.server = r.String("server");
    h.backends = r.Strings("backends");
    const json& infos = r.Array("backend_info");
    for (std::size_t i = 0; i < infos.size(); ++i) {
      std::string problem;
      std::optional<BackendInfo> info = BackendInfoFromJson(infos[i], problem);
      if (!info) throw BadField{"field 'backend_info[" + std::to_string(i) + "]': " + problem};
      h.backend_info.push_back(std::move(*info));
    }
    h.rewards = r.Strings("rewards");
    h.action_kinds = r.Strings("action_kinds");
    h.feature_names = r.Strings("feature_names");
    h.default_max_steps = r.Int("default_max_steps");
    h.default_time_budget_s = r.Number("default_time_budget_s");
    h.max_message_bytes = r.Unsigned("max_message_bytes");
    h.instance = r.StringOr("instance", "");
    return h;
  });
}

std::optional<EnvInfo> EnvInfoFromWire(const json& wire, std::string& problem) {
  return Guarded<EnvInfo>(problem, [&] {
    const Reader r(wire, "");
    EnvInfo e;
    e.env = r.String("env");
    e.task = r.String("task");
    e.backend = r.String("backend");
    e.reward = r.String("reward");
    e.reward_min = r.Number("reward_min");
    e.reward_max = r.Number("reward_max");
    e.max_steps = r.Int("max_steps");
    e.time_budget_s = r.Number("time_budget_s");
    e.record = r.Bool("record");
    e.instance = r.StringOr("instance", "");
    return e;
  });
}

std::optional<Observation> ObservationFromWire(const json& wire, std::string& problem) {
  return Guarded<Observation>(problem, [&] { return ReadObservation(Reader(wire, "")); });
}

std::optional<ResetResult> ResetResultFromWire(const json& wire, std::string& problem) {
  return Guarded<ResetResult>(problem, [&] {
    const Reader r(wire, "");
    ResetResult result;
    result.observation = ReadObservation(Reader(r.Require("observation"), "observation"));
    result.info = r.Map("info");
    return result;
  });
}

std::optional<StepResult> StepResultFromWire(const json& wire, std::string& problem) {
  return Guarded<StepResult>(problem, [&] {
    const Reader r(wire, "");
    StepResult result;
    result.observation = ReadObservation(Reader(r.Require("observation"), "observation"));
    result.reward = r.Number("reward");
    result.terminated = r.Bool("terminated");
    result.truncated = r.Bool("truncated");
    result.info = r.Map("info");
    return result;
  });
}

std::optional<HealthResult> HealthResultFromWire(const json& wire, std::string& problem) {
  return Guarded<HealthResult>(problem, [&] {
    const Reader r(wire, "");
    HealthResult h;
    h.status = r.String("status");
    h.uptime_s = r.Number("uptime_s");
    h.sessions = r.Unsigned("sessions");
    h.runners = r.IntMap("runners");
    h.queued = r.Unsigned("queued");
    h.running = r.Unsigned("running");
    h.instance = r.StringOr("instance", "");
    return h;
  });
}

}  // namespace kernelgym::protocol
