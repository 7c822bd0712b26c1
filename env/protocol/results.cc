#include "env/protocol/results.h"

#include <limits>

namespace kernelgym::protocol {
namespace {

using nlohmann::json;

// Thrown inside this file only; the FromWire functions turn it into `problem`.
struct BadField {
  std::string what;
};

std::string TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "nil";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a float";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "a map";
    case json::value_t::binary:
      return "bytes";
    default:
      return "nothing";
  }
}

// Reads the known fields of one result map. `path_` is the map's place in the result
// ("" for the top, "observation" for a nested one), so problems name the field as a client would
// write it: 'observation.features[2]'.
class Reader {
 public:
  Reader(const json& map, std::string path) : map_(map), path_(std::move(path)) {
    if (!map.is_object())
      throw BadField{(path_.empty() ? std::string("the result") : "field '" + path_ + "'") + " must be a map, not " +
                     TypeName(map)};
  }

  const json& Require(const std::string& key) const {
    auto it = map_.find(key);
    if (it == map_.end()) throw BadField{"missing field '" + Path(key) + "'"};
    return *it;
  }
  std::string String(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_string()) Wrong(key, "a string", v);
    return v.get<std::string>();
  }
  bool Bool(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_boolean()) Wrong(key, "a boolean", v);
    return v.get<bool>();
  }
  int64_t Int(const std::string& key) const { return IntValue(Require(key), Path(key)); }
  uint64_t Unsigned(const std::string& key) const {
    const json& v = Require(key);
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    Wrong(key, "a non-negative integer", v);
  }
  double Number(const std::string& key) const { return NumberValue(Require(key), Path(key)); }
  const json& Map(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_object()) Wrong(key, "a map", v);
    return v;
  }
  std::vector<std::string> Strings(const std::string& key) const {
    const json& v = Array(key);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) Wrong(key + "[" + std::to_string(i) + "]", "a string", v[i]);
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  // A map of string -> integer (health's `runners`); a bad value is named 'key.name'.
  std::map<std::string, int64_t> IntMap(const std::string& key) const {
    const json& v = Map(key);
    std::map<std::string, int64_t> out;
    for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = IntValue(it.value(), Path(key + "." + it.key()));
    return out;
  }
  std::vector<double> Numbers(const std::string& key) const {
    const json& v = Array(key);
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(NumberValue(v[i], Path(key + "[" + std::to_string(i) + "]")));
    return out;
  }

  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  const json& Array(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_array()) Wrong(key, "an array", v);
    return v;
  }

 private:
  [[noreturn]] void Wrong(const std::string& key, const std::string& want, const json& got) const {
    throw BadField{"field '" + Path(key) + "' must be " + want + ", not " + TypeName(got)};
  }
  static int64_t IntValue(const json& v, const std::string& path) {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw BadField{"field '" + path + "' is out of range"};
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    throw BadField{"field '" + path + "' must be an integer, not " + TypeName(v)};
  }
  static double NumberValue(const json& v, const std::string& path) {
    if (v.is_number()) return v.get<double>();
    throw BadField{"field '" + path + "' must be a number, not " + TypeName(v)};
  }

  const json& map_;
  std::string path_;
};

template <typename T, typename Read>
std::optional<T> Guarded(std::string& problem, Read read) {
  try {
    return read();
  } catch (const BadField& bad) {
    problem = bad.what;
    return std::nullopt;
  }
}

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
          {"max_message_bytes", hello.max_message_bytes}};
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
          {"record", info.record}};
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
  return {{"status", health.status},   {"uptime_s", health.uptime_s}, {"sessions", health.sessions},
          {"runners", health.runners}, {"queued", health.queued},     {"running", health.running}};
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
      const Reader b(infos[i], "backend_info[" + std::to_string(i) + "]");
      BackendInfo info;
      info.name = b.String("name");
      info.language = b.String("language");
      info.fence_tags = b.Strings("fence_tags");
      info.source_file = b.String("source_file");
      info.task_folder = b.String("task_folder");
      info.description = b.String("description");
      info.quotes_torch_reference = b.Bool("quotes_torch_reference");
      info.source_mutations = b.Bool("source_mutations");
      info.times_on_any_host = b.Bool("times_on_any_host");
      info.evaluated_by_server = b.Bool("evaluated_by_server");
      h.backend_info.push_back(std::move(info));
    }
    h.rewards = r.Strings("rewards");
    h.action_kinds = r.Strings("action_kinds");
    h.feature_names = r.Strings("feature_names");
    h.default_max_steps = r.Int("default_max_steps");
    h.default_time_budget_s = r.Number("default_time_budget_s");
    h.max_message_bytes = r.Unsigned("max_message_bytes");
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
    return h;
  });
}

}  // namespace kernelgym::protocol
