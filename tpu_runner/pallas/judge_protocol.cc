#include "tpu_runner/pallas/judge_protocol.h"

#include <cmath>
#include <type_traits>

namespace kernelgym::judge {
namespace {

using nlohmann::json;

// Each record's fields, listed once: `visit(name, member)` for every field, in the wire's order.
// The encoder and the strict decoder below both walk these lists.
template <class V> void Fields(InputSpec& t, V&& v) { v("shape", t.shape), v("dtype", t.dtype); }
template <class V> void Fields(Diagnostic& t, V&& v) {
  v("file", t.file), v("line", t.line), v("column", t.column), v("severity", t.severity), v("message", t.message);
}
template <class V> void Fields(Ready& t, V&& v) {
  v("role", t.role), v("jax", t.jax), v("start_seconds", t.start_seconds), v("target", t.target),
      v("on_tpu", t.on_tpu), v("device_kind", t.device_kind), v("fork_server_job", t.fork_server_job),
      v("fork_server_start_seconds", t.fork_server_start_seconds);
}
template <class V> void Fields(JudgeJob& t, V&& v) {
  v("task_dir", t.task_dir), v("layout", t.layout), v("suite", t.suite), v("out_dir", t.out_dir),
      v("candidate_path", t.candidate_path), v("seeds", t.seeds), v("static_check", t.static_check),
      v("run_timing", t.run_timing), v("timing_seed", t.timing_seed), v("estimate_reference", t.estimate_reference),
      v("estimate_candidate", t.estimate_candidate);
}
template <class V> void Fields(TraceJob& t, V&& v) {
  v("candidate_path", t.candidate_path), v("size_sets", t.size_sets), v("artifact_path", t.artifact_path);
}
template <class V> void Fields(Specs& t, V&& v) { v("size_sets", t.size_sets); }
template <class V> void Fields(ExpectedOutput& t, V&& v) {
  v("name", t.name), v("dtype", t.dtype), v("shape", t.shape), v("file", t.file), v("atol", t.atol), v("rtol", t.rtol);
}
template <class V> void Fields(ReferenceTrial& t, V&& v) {
  v("seed", t.seed), v("size_set", t.size_set), v("inputs_sha256", t.inputs_sha256), v("outputs", t.outputs);
}
template <class V> void Fields(ReferenceEstimate& t, V&& v) {
  v("estimated_us", t.estimated_us), v("xla_model_us", t.xla_model_us), v("trusted", t.trusted), v("flops", t.flops),
      v("bytes_accessed", t.bytes_accessed), v("error", t.error);
}
template <class V> void Fields(Reference& t, V&& v) { v("trials", t.trials), v("estimate", t.estimate); }
template <class V> void Fields(Artifact& t, V&& v) { v("file", t.file); }
template <class V> void Fields(Traced& t, V&& v) { v("file", t.file), v("bytes", t.bytes), v("stage_seconds", t.stage_seconds); }
template <class V> void Fields(Progress& t, V&& v) { v("stage", t.stage), v("trial", t.trial), v("repeat", t.repeat); }
template <class V> void Fields(OutputFile& t, V&& v) { v("dtype", t.dtype), v("shape", t.shape), v("file", t.file); }
template <class V> void Fields(CandidateRun& t, V&& v) {
  v("trial", t.trial), v("repeat", t.repeat), v("outputs", t.outputs), v("inputs_sha256", t.inputs_sha256);
}
template <class V> void Fields(TimingSample& t, V&& v) { v("reference_ns", t.reference_ns), v("candidate_ns", t.candidate_ns); }
template <class V> void Fields(Timing& t, V&& v) {
  v("representative", t.representative), v("clock", t.clock), v("reason", t.reason), v("samples", t.samples),
      v("seconds", t.seconds), v("profile", t.profile);
}
template <class V> void Fields(TpuCompile& t, V&& v) {
  v("target", t.target), v("device_kind", t.device_kind), v("deviceless", t.deviceless), v("seconds", t.seconds),
      v("memory", t.memory);
}
template <class V> void Fields(KernelProfile& t, V&& v) {
  v("kernel", t.kernel), v("grid_steps", t.grid_steps), v("bundles_per_step", t.bundles_per_step),
      v("estimated_cycles", t.estimated_cycles), v("critical_path_cycles", t.critical_path_cycles),
      v("unit_share", t.unit_share);
}
template <class V> void Fields(CandidateEstimate& t, V&& v) {
  v("estimated_us", t.estimated_us), v("mosaic_cycles", t.mosaic_cycles), v("xla_us", t.xla_us), v("trusted", t.trusted),
      v("reasons", t.reasons), v("method", t.method), v("kernels", t.kernels);
}
template <class V> void Fields(CompileKey& t, V&& v) { v("program", t.program); }
template <class V> void Fields(CompileFacts& t, V&& v) { v("tpu_compile", t.tpu_compile), v("estimate", t.estimate); }
template <class V> void Fields(Result& t, V&& v) {
  v("status", t.status), v("stage", t.stage), v("message", t.message), v("diagnostics", t.diagnostics),
      v("details", t.details), v("stage_seconds", t.stage_seconds), v("trials", t.trials), v("timing", t.timing),
      v("tpu_compile", t.tpu_compile), v("estimate", t.estimate), v("pallas_calls", t.pallas_calls);
}
template <class V> void Fields(Fatal& t, V&& v) { v("message", t.message); }
template <class V> void Fields(ForkJob& t, V&& v) { v("descriptors", t.descriptors); }
template <class V> void Fields(JobEnded& t, V&& v) {
  v("job", t.job), v("exit_code", t.exit_code), v("signal", t.signal), v("clean", t.clean);
}

template <class T> constexpr const char* kKind = nullptr;
template <> constexpr const char* kKind<Ready> = "ready";
template <> constexpr const char* kKind<JudgeJob> = "job";
template <> constexpr const char* kKind<TraceJob> = "trace_job";
template <> constexpr const char* kKind<Specs> = "specs";
template <> constexpr const char* kKind<Reference> = "reference";
template <> constexpr const char* kKind<Artifact> = "artifact";
template <> constexpr const char* kKind<Traced> = "traced";
template <> constexpr const char* kKind<Progress> = "progress";
template <> constexpr const char* kKind<CompileKey> = "compile_key";
template <> constexpr const char* kKind<CompileFacts> = "compile_facts";
template <> constexpr const char* kKind<Result> = "result";
template <> constexpr const char* kKind<Fatal> = "fatal";
template <> constexpr const char* kKind<ForkJob> = "fork_job";
template <> constexpr const char* kKind<JobEnded> = "job_ended";

template <class T> struct IsVector : std::false_type {};
template <class T> struct IsVector<std::vector<T>> : std::true_type {};
template <class T> struct IsMap : std::false_type {};
template <class T> struct IsMap<std::map<std::string, T>> : std::true_type {};
template <class T> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};

// --- encoding ---

template <class T> json Write(const T& value);

template <class T> json WriteRecord(const T& record) {
  json out = json::object();
  Fields(const_cast<T&>(record), [&](const char* name, const auto& member) { out[name] = Write(member); });
  return out;
}

template <class T> json Write(const T& value) {
  if constexpr (IsOptional<T>::value) {
    return value ? Write(*value) : json(nullptr);
  } else if constexpr (IsVector<T>::value) {
    json out = json::array();
    for (const auto& v : value) out.push_back(Write(v));
    return out;
  } else if constexpr (IsMap<T>::value) {
    json out = json::object();
    for (const auto& [k, v] : value) out[k] = Write(v);
    return out;
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> || std::is_same_v<T, int64_t>) {
    return value;
  } else if constexpr (std::is_same_v<T, double>) {
    return std::isfinite(value) ? json(value) : json(0.0);  // JSON has no NaN or infinity
  } else {
    return WriteRecord(value);
  }
}

// --- strict decoding ---

struct Refusal {
  std::string message;
};

const char* TypeName(const json& j) { return j.type_name(); }

template <class T> void Read(const json& j, T& out, const std::string& where);

template <class T> void ReadRecord(const json& j, T& out, const std::string& where) {
  if (!j.is_object()) throw Refusal{where + ": must be an object, not " + TypeName(j)};
  std::size_t known = 0;
  Fields(out, [&](const char* name, auto& member) {
    const auto it = j.find(name);
    if (it == j.end()) throw Refusal{where + ": missing field '" + name + "'"};
    Read(*it, member, where + "." + name);
    ++known;
  });
  if (known != j.size())
    for (const auto& [key, value] : j.items()) {
      bool defined = false;
      Fields(out, [&](const char* name, auto&) { defined = defined || key == name; });
      if (!defined)
        throw Refusal{where + ": unknown field '" + key + "' (version " + std::to_string(kJudgeProtocolVersion) +
                      " does not define it)"};
    }
}

template <class T> void Read(const json& j, T& out, const std::string& where) {
  if constexpr (IsOptional<T>::value) {
    if (j.is_null()) {
      out.reset();
    } else {
      out.emplace();
      Read(j, *out, where);
    }
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) throw Refusal{where + ": must be a list, not " + TypeName(j)};
    out.clear();
    for (std::size_t i = 0; i < j.size(); ++i) {
      out.emplace_back();
      Read(j[i], out.back(), where + "[" + std::to_string(i) + "]");
    }
  } else if constexpr (IsMap<T>::value) {
    if (!j.is_object()) throw Refusal{where + ": must be an object, not " + TypeName(j)};
    out.clear();
    for (const auto& [k, v] : j.items()) Read(v, out[k], where + "." + k);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) throw Refusal{where + ": must be a string, not " + TypeName(j)};
    out = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) throw Refusal{where + ": must be a boolean, not " + TypeName(j)};
    out = j.get<bool>();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (!j.is_number_integer()) throw Refusal{where + ": must be an integer, not " + TypeName(j)};
    out = j.get<int64_t>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!j.is_number()) throw Refusal{where + ": must be a number, not " + TypeName(j)};
    out = j.get<double>();
  } else {
    ReadRecord(j, out, where);
  }
}

template <class T> bool TryKind(const json& j, const std::string& kind, std::optional<Message>& out) {
  if (kind != kKind<T>) return false;
  json fields = j;
  fields.erase("v");
  fields.erase("kind");
  T message;
  ReadRecord(fields, message, kind);
  out = std::move(message);
  return true;
}

}  // namespace

std::string KindOf(const Message& message) {
  return std::visit([](const auto& m) { return std::string(kKind<std::decay_t<decltype(m)>>); }, message);
}

json ToJson(const Message& message) {
  return std::visit(
      [](const auto& m) {
        json out = {{"v", kJudgeProtocolVersion}, {"kind", kKind<std::decay_t<decltype(m)>>}};
        out.update(WriteRecord(m));
        return out;
      },
      message);
}

std::string Encode(const Message& message) { return ToJson(message).dump(); }

std::optional<Message> Decode(const json& j, std::string& error) {
  if (!j.is_object()) {
    error = "a message must be a JSON object";
    return std::nullopt;
  }
  const auto v = j.find("v"), kind = j.find("kind");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != kJudgeProtocolVersion) {
    error = "protocol version " + (v == j.end() ? std::string("missing") : v->dump()) + "; this runner speaks version " +
            std::to_string(kJudgeProtocolVersion);
    return std::nullopt;
  }
  if (kind == j.end() || !kind->is_string()) {
    error = "a message without a kind";
    return std::nullopt;
  }
  const std::string name = kind->get<std::string>();
  std::optional<Message> out;
  try {
    const bool known = TryKind<Ready>(j, name, out) || TryKind<JudgeJob>(j, name, out) ||
                       TryKind<TraceJob>(j, name, out) || TryKind<Specs>(j, name, out) ||
                       TryKind<Reference>(j, name, out) || TryKind<Artifact>(j, name, out) ||
                       TryKind<Traced>(j, name, out) || TryKind<Progress>(j, name, out) ||
                       TryKind<CompileKey>(j, name, out) || TryKind<CompileFacts>(j, name, out) ||
                       TryKind<Result>(j, name, out) || TryKind<Fatal>(j, name, out) ||
                       TryKind<ForkJob>(j, name, out) || TryKind<JobEnded>(j, name, out);
    if (!known) error = "unknown message kind '" + name + "'";
  } catch (const Refusal& refusal) {
    error = refusal.message;
    out.reset();
  }
  return out;
}

std::optional<Message> Decode(const std::string& line, std::string& error) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = "not JSON: " + line.substr(0, 200);
    return std::nullopt;
  }
  return Decode(j, error);
}

}  // namespace kernelgym::judge
