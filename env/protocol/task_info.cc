#include "env/protocol/task_info.h"

#include "env/protocol/wire_reader.h"

namespace kernelgym::protocol {
namespace {

using nlohmann::json;
using wire::BadField;
using wire::Guarded;
using wire::Reader;

json SizesWire(const std::map<std::string, int64_t>& sizes) {
  json out = json::object();
  for (const auto& [name, value] : sizes) out[name] = value;
  return out;
}

json TensorsWire(const std::vector<TensorInfo>& tensors, bool outputs) {
  json out = json::array();
  for (const TensorInfo& t : tensors) {
    json entry = {{"name", t.name}, {"dtype", t.dtype}, {"dims", t.dims}, {"shape", t.shape}};
    if (outputs) {
      entry["atol"] = t.atol;
      entry["rtol"] = t.rtol;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<int64_t> Ints(const Reader& r, const std::string& key) {
  const json& v = r.Array(key);
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) throw BadField{"field '" + r.Path(key) + "[" + std::to_string(i) + "]' must be an integer"};
    out.push_back(v[i].get<int64_t>());
  }
  return out;
}

std::vector<TensorInfo> ReadTensors(const Reader& r, const std::string& key, bool outputs) {
  const json& list = r.Array(key);
  std::vector<TensorInfo> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Reader t(list[i], r.Path(key) + "[" + std::to_string(i) + "]");
    TensorInfo info;
    info.name = t.String("name");
    info.dtype = t.String("dtype");
    info.dims = t.Strings("dims");
    info.shape = Ints(t, "shape");
    if (outputs) {
      info.atol = t.Number("atol");
      info.rtol = t.Number("rtol");
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::map<std::string, std::map<std::string, int64_t>> ReadSizeSets(const Reader& r, const std::string& key) {
  std::map<std::string, std::map<std::string, int64_t>> out;
  const json& sets = r.Map(key);
  for (auto it = sets.begin(); it != sets.end(); ++it) {
    const Reader set(sets, r.Path(key));
    out[it.key()] = set.IntMap(it.key());
  }
  return out;
}

json KnobsWire(const std::map<std::string, KnobDomain>& knobs) {
  json out = json::object();
  for (const auto& [name, knob] : knobs) {
    json values = json::array();
    for (const KnobValue& v : knob.values) values.push_back(KnobValueToJson(v));
    out[name] = {{"values", values}, {"default", KnobValueToJson(knob.default_value)}};
  }
  return out;
}

// `knobs` is the map at `path` (name -> {values, default}).
std::map<std::string, KnobDomain> ReadKnobs(const json& knobs, const std::string& path) {
  std::map<std::string, KnobDomain> out;
  for (auto it = knobs.begin(); it != knobs.end(); ++it) {
    const Reader k(it.value(), path + "." + it.key());
    KnobDomain domain;
    const json& values = k.Array("values");
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::optional<KnobValue> value = KnobValueFromJson(values[i]);
      if (!value) throw BadField{"field '" + k.Path("values[" + std::to_string(i) + "]") + "' is not a knob value"};
      domain.values.push_back(std::move(*value));
    }
    std::optional<KnobValue> fallback = KnobValueFromJson(k.Require("default"));
    if (!fallback) throw BadField{"field '" + k.Path("default") + "' is not a knob value"};
    domain.default_value = std::move(*fallback);
    out[it.key()] = std::move(domain);
  }
  return out;
}

TaskSummary ReadSummary(const Reader& r) {
  TaskSummary s;
  s.id = r.String("id");
  s.suite = r.String("suite");
  s.category = r.String("category");
  s.description = r.String("description");
  s.signature = r.String("signature");
  s.flops = r.Number("flops");
  s.bytes = r.Number("bytes");
  s.threads = r.Int("threads");
  s.backends = r.Strings("backends");
  return s;
}

}  // namespace

json ToWire(const TaskSummary& s) {
  return {{"id", s.id},         {"suite", s.suite}, {"category", s.category}, {"description", s.description},
          {"signature", s.signature}, {"flops", s.flops}, {"bytes", s.bytes}, {"threads", s.threads},
          {"backends", s.backends}};
}

json ToWire(const TaskInfo& info) {
  json out = ToWire(info.summary);
  out["sizes"] = SizesWire(info.sizes);
  json checks = json::array();
  for (const auto& sizes : info.check_sizes) checks.push_back(SizesWire(sizes));
  out["check_sizes"] = checks;
  out["inputs"] = TensorsWire(info.inputs, /*outputs=*/false);
  out["outputs"] = TensorsWire(info.outputs, /*outputs=*/true);
  out["tolerance"] = {{"atol", info.atol}, {"rtol", info.rtol}};
  out["knobs"] = KnobsWire(info.knobs);
  json versions = json::object();
  for (const auto& [backend, v] : info.versions) {
    json sets = json::object();
    for (const auto& [name, sizes] : v.size_sets) sets[name] = SizesWire(sizes);
    versions[backend] = {{"starter_source", v.starter_source},
                         {"reference_source", v.reference_source},
                         {"size_sets", sets},
                         {"compile_flags", v.compile_flags},
                         {"extra_allowed_headers", v.extra_allowed_headers},
                         {"allowed_libraries", v.allowed_libraries}};
    if (!v.knobs.empty()) versions[backend]["knobs"] = KnobsWire(v.knobs);
  }
  out["versions"] = versions;
  return out;
}

std::optional<TaskSummary> TaskSummaryFromWire(const json& wire, std::string& problem) {
  return Guarded<TaskSummary>(problem, [&] { return ReadSummary(Reader(wire, "")); });
}

std::optional<std::vector<TaskSummary>> TaskListFromWire(const json& wire, std::string& problem) {
  return Guarded<std::vector<TaskSummary>>(problem, [&] {
    const json& tasks = Reader(wire, "").Array("tasks");
    std::vector<TaskSummary> out;
    for (std::size_t i = 0; i < tasks.size(); ++i) out.push_back(ReadSummary(Reader(tasks[i], "tasks[" + std::to_string(i) + "]")));
    return out;
  });
}

std::optional<TaskInfo> TaskInfoFromWire(const json& wire, std::string& problem) {
  return Guarded<TaskInfo>(problem, [&] {
    const Reader r(wire, "");
    TaskInfo info;
    info.summary = ReadSummary(r);
    info.sizes = r.IntMap("sizes");
    const json& checks = r.Array("check_sizes");
    for (std::size_t i = 0; i < checks.size(); ++i) {
      const std::string path = "check_sizes[" + std::to_string(i) + "]";
      if (!checks[i].is_object()) throw BadField{"field '" + path + "' must be a map"};
      std::map<std::string, int64_t> sizes;
      for (auto it = checks[i].begin(); it != checks[i].end(); ++it) {
        if (!it->is_number_integer()) throw BadField{"field '" + path + "." + it.key() + "' must be an integer"};
        sizes[it.key()] = it->get<int64_t>();
      }
      info.check_sizes.push_back(std::move(sizes));
    }
    info.inputs = ReadTensors(r, "inputs", /*outputs=*/false);
    info.outputs = ReadTensors(r, "outputs", /*outputs=*/true);
    const Reader tolerance(r.Map("tolerance"), "tolerance");
    info.atol = tolerance.Number("atol");
    info.rtol = tolerance.Number("rtol");
    info.knobs = ReadKnobs(r.Map("knobs"), "knobs");
    const json& versions = r.Map("versions");
    for (auto it = versions.begin(); it != versions.end(); ++it) {
      const Reader v(it.value(), "versions." + it.key());
      TaskVersion version;
      version.starter_source = v.String("starter_source");
      version.reference_source = v.String("reference_source");
      version.size_sets = ReadSizeSets(v, "size_sets");
      version.compile_flags = v.Strings("compile_flags");
      version.extra_allowed_headers = v.Strings("extra_allowed_headers");
      version.allowed_libraries = v.Strings("allowed_libraries");
      // Absent when the version has no template of its own.
      if (it.value().contains("knobs")) version.knobs = ReadKnobs(v.Map("knobs"), v.Path("knobs"));
      info.versions[it.key()] = std::move(version);
    }
    return info;
  });
}

}  // namespace kernelgym::protocol
