// msgpack <-> runner protocol messages (runner_messages.h). Like the client codec, decoding
// never throws and never trusts the bytes: every problem names the op and the field.
#include <cmath>
#include <map>
#include <msgpack.hpp>
#include <set>

#include "env/protocol/messages.h"
#include "env/protocol/runner_messages.h"
#include "tpu_runner/result_json.h"

namespace kernelgym::protocol::runner {
namespace {

using nlohmann::json;
using Packer = msgpack::packer<msgpack::sbuffer>;

// Thrown inside this file only; the Decode functions turn it into `problem`.
struct DecodeFailure {
  std::string message;
};

// A result's raw timing samples are the largest arrays on the wire (one per timed round).
const msgpack::unpack_limit kLimits(/*array=*/1 << 16, /*map=*/1 << 12, /*str=*/kMaxMessageBytes,
                                    /*bin=*/kMaxMessageBytes, /*ext=*/0, /*depth=*/32);

std::string TypeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a float";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::BIN:
      return "bytes";
    case msgpack::type::ARRAY:
      return "an array";
    case msgpack::type::MAP:
      return "a map";
    default:
      return "an extension";
  }
}

// The fields of one msgpack map, read strictly: every field is required, wrong types fail, and
// Finish fails on a field nobody read. `where` is the op (or the op and a nested field).
class Fields {
 public:
  Fields(const msgpack::object& map, std::string where) : where_(std::move(where)) {
    if (map.type != msgpack::type::MAP) Fail("must be a map, not " + TypeName(map));
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
      const msgpack::object_kv& kv = map.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) Fail("has a key that is " + TypeName(kv.key) + ", not a string");
      const std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
      if (!entries_.emplace(key, &kv.val).second) Fail("has the field '" + key + "' twice");
    }
  }

  const msgpack::object& Require(const std::string& key) {
    used_.insert(key);
    auto it = entries_.find(key);
    if (it == entries_.end()) Fail("needs the field '" + key + "'");
    return *it->second;
  }
  std::string String(const std::string& key) { return AsString(Require(key), key); }
  bool Bool(const std::string& key) {
    const msgpack::object& o = Require(key);
    if (o.type != msgpack::type::BOOLEAN) FieldType(key, "a boolean", o);
    return o.via.boolean;
  }
  int64_t Int(const std::string& key, int64_t min, int64_t max) {
    const msgpack::object& o = Require(key);
    int64_t v = 0;
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 > static_cast<uint64_t>(max)) Fail("field '" + key + "' is out of range");
      v = static_cast<int64_t>(o.via.u64);
    } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      v = o.via.i64;
    } else {
      FieldType(key, "an integer", o);
    }
    if (v < min || v > max)
      Fail("field '" + key + "' must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], not " +
           std::to_string(v));
    return v;
  }
  uint64_t Unsigned(const std::string& key) { return AsUnsigned(Require(key), key); }
  double Number(const std::string& key, double min) {
    const msgpack::object& o = Require(key);
    double x = 0;
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64)
      x = o.via.f64;
    else if (o.type == msgpack::type::POSITIVE_INTEGER)
      x = static_cast<double>(o.via.u64);
    else if (o.type == msgpack::type::NEGATIVE_INTEGER)
      x = static_cast<double>(o.via.i64);
    else
      FieldType(key, "a number", o);
    if (!std::isfinite(x)) Fail("field '" + key + "' must be finite");
    if (x < min) Fail("field '" + key + "' must be >= " + std::to_string(min));
    return x;
  }
  const msgpack::object& Array(const std::string& key) {
    const msgpack::object& o = Require(key);
    if (o.type != msgpack::type::ARRAY) FieldType(key, "an array", o);
    return o;
  }
  std::vector<std::string> Strings(const std::string& key) {
    const msgpack::object& a = Array(key);
    std::vector<std::string> values;
    for (uint32_t i = 0; i < a.via.array.size; ++i) values.push_back(AsString(a.via.array.ptr[i], Item(key, i)));
    return values;
  }
  std::vector<uint64_t> Unsigneds(const std::string& key) {
    const msgpack::object& a = Array(key);
    std::vector<uint64_t> values;
    for (uint32_t i = 0; i < a.via.array.size; ++i) values.push_back(AsUnsigned(a.via.array.ptr[i], Item(key, i)));
    return values;
  }
  std::map<std::string, std::string> StringMap(const std::string& key) {
    const msgpack::object& m = Require(key);
    Fields entries(m, where_ + "." + key);
    std::map<std::string, std::string> values;
    for (const auto& [name, value] : entries.entries_) values[name] = entries.String(name);
    return values;
  }

  void Finish() const {
    for (const auto& [key, value] : entries_)
      if (!used_.count(key)) Fail("has an unknown field '" + key + "'");
  }

  [[noreturn]] void Fail(const std::string& what) const { throw DecodeFailure{where_ + ": " + what}; }
  [[noreturn]] void FieldType(const std::string& key, const std::string& want, const msgpack::object& got) const {
    Fail("field '" + key + "' must be " + want + ", not " + TypeName(got));
  }
  const std::string& where() const { return where_; }

 private:
  static std::string Item(const std::string& key, uint32_t i) { return key + "[" + std::to_string(i) + "]"; }
  std::string AsString(const msgpack::object& o, const std::string& key) const {
    if (o.type != msgpack::type::STR) FieldType(key, "a string", o);
    return std::string(o.via.str.ptr, o.via.str.size);
  }
  uint64_t AsUnsigned(const msgpack::object& o, const std::string& key) const {
    if (o.type != msgpack::type::POSITIVE_INTEGER) FieldType(key, "a non-negative integer", o);
    return o.via.u64;
  }

  std::string where_;
  std::map<std::string, const msgpack::object*> entries_;
  std::set<std::string> used_;
};

// The result travels as its JSON tree (ResultToJson with samples): msgpack <-> JSON values.
json ToJson(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::NIL:
      return nullptr;
    case msgpack::type::BOOLEAN:
      return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return o.via.f64;
    case msgpack::type::STR:
      return std::string(o.via.str.ptr, o.via.str.size);
    case msgpack::type::ARRAY: {
      json a = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(ToJson(o.via.array.ptr[i], where));
      return a;
    }
    case msgpack::type::MAP: {
      json m = json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) throw DecodeFailure{where + ": map keys must be strings"};
        m[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = ToJson(kv.val, where);
      }
      return m;
    }
    default:
      throw DecodeFailure{where + ": " + TypeName(o) + " is not allowed here"};
  }
}

void PackJson(Packer& pk, const json& j) {
  switch (j.type()) {
    case json::value_t::boolean:
      pk.pack(j.get<bool>());
      break;
    case json::value_t::number_unsigned:
      pk.pack(j.get<uint64_t>());
      break;
    case json::value_t::number_integer:
      pk.pack(j.get<int64_t>());
      break;
    case json::value_t::number_float:
      pk.pack(j.get<double>());
      break;
    case json::value_t::string:
      pk.pack(j.get_ref<const std::string&>());
      break;
    case json::value_t::array:
      pk.pack_array(static_cast<uint32_t>(j.size()));
      for (const json& e : j) PackJson(pk, e);
      break;
    case json::value_t::object:
      pk.pack_map(static_cast<uint32_t>(j.size()));
      for (const auto& [k, v] : j.items()) {
        pk.pack(k);
        PackJson(pk, v);
      }
      break;
    default:
      pk.pack_nil();
      break;
  }
}

// Envelope first (v, op), then the op's fields in declared order: one canonical encoding per
// message, which is what the golden fixtures pin down.
void Header(Packer& pk, int v, const char* op, uint32_t fields) {
  pk.pack_map(2 + fields);
  pk.pack("v"), pk.pack(v), pk.pack("op"), pk.pack(std::string(op));
}

std::string Bytes(const msgpack::sbuffer& buffer) { return std::string(buffer.data(), buffer.size()); }

// Unpacks one message and reads its envelope: the version must be ours, the op is returned.
// `handle` keeps the objects alive.
std::string OpenEnvelope(std::string_view bytes, msgpack::object_handle& handle, int& v) {
  if (bytes.size() > kMaxMessageBytes)
    throw DecodeFailure{"message of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                        std::to_string(kMaxMessageBytes) + "-byte limit"};
  std::size_t offset = 0;
  try {
    handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kLimits);
  } catch (const std::exception& e) {
    throw DecodeFailure{std::string("not a valid msgpack message: ") + e.what()};
  }
  if (offset != bytes.size()) throw DecodeFailure{"trailing bytes after the message"};
  Fields envelope(handle.get(), "message");
  const std::string op = envelope.String("op");
  Fields f(handle.get(), op);
  v = static_cast<int>(f.Int("v", INT32_MIN, INT32_MAX));
  if (v != kRunnerProtocolVersion)
    f.Fail("runner protocol version " + std::to_string(v) + " is not supported (this side speaks " +
           std::to_string(kRunnerProtocolVersion) + ")");
  return op;
}

FromRunner DecodeFromRunnerBody(const std::string& op, int v, const msgpack::object& map) {
  Fields f(map, op);
  f.Require("v"), f.Require("op");
  FromRunner message;
  if (op == "runner.hello") {
    RunnerHello hello;
    hello.v = v;
    hello.runner_id = f.String("runner_id");
    if (hello.runner_id.empty()) f.Fail("field 'runner_id' must not be empty");
    hello.backends = f.Strings("backends");
    if (hello.backends.empty()) f.Fail("field 'backends' must name at least one backend");
    hello.fingerprint = f.StringMap("fingerprint");
    hello.slots = static_cast<int>(f.Int("slots", 1, 4096));
    hello.pid = f.Int("pid", 0, INT64_MAX);
    message = std::move(hello);
  } else if (op == "heartbeat") {
    message = Heartbeat{static_cast<int>(f.Int("busy", 0, 4096))};
  } else if (op == "result") {
    JobDone done;
    done.job_id = f.Unsigned("job_id");
    const msgpack::object& tree = f.Require("result");
    if (tree.type != msgpack::type::MAP) f.FieldType("result", "a map", tree);
    std::string problem;
    std::optional<EvalResult> result = ResultFromJson(ToJson(tree, op + ".result"), problem);
    if (!result) f.Fail("field 'result' is not an evaluation result: " + problem);
    done.result = std::move(*result);
    message = std::move(done);
  } else {
    throw DecodeFailure{"unknown op '" + op + "' from a runner (runner.hello, heartbeat, result)"};
  }
  f.Finish();
  return message;
}

ToRunner DecodeToRunnerBody(const std::string& op, const msgpack::object& map) {
  Fields f(map, op);
  f.Require("v"), f.Require("op");
  ToRunner message;
  if (op == "welcome") {
    const double interval = f.Number("heartbeat_interval_s", 0);
    if (interval <= 0) f.Fail("field 'heartbeat_interval_s' must be > 0");
    message = Welcome{interval};
  } else if (op == "job") {
    Job job;
    job.job_id = f.Unsigned("job_id");
    job.backend = f.String("backend");
    job.task = f.String("task");
    job.source = f.String("source");
    Fields o(f.Require("options"), op + ".options");
    job.options.seeds = o.Unsigneds("seeds");
    job.options.timing_seed = o.Unsigned("timing_seed");
    job.options.run_timing = o.Bool("run_timing");
    job.options.timing_budget_s = o.Number("timing_budget_s", 0);
    job.options.min_rounds = static_cast<int>(o.Int("min_rounds", 0, 1 << 20));
    job.options.target_relative_ci = o.Number("target_relative_ci", 0);
    o.Finish();
    message = std::move(job);
  } else if (op == "ack") {
    message = Ack{};
  } else if (op == "reregister") {
    message = Reregister{};
  } else {
    throw DecodeFailure{"unknown op '" + op + "' from a server (welcome, job, ack, reregister)"};
  }
  f.Finish();
  return message;
}

}  // namespace

std::string Encode(const FromRunner& message) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, RunnerHello>) {
          Header(pk, m.v, "runner.hello", 5);
          pk.pack("runner_id"), pk.pack(m.runner_id), pk.pack("backends"), pk.pack(m.backends);
          pk.pack("fingerprint"), pk.pack(m.fingerprint), pk.pack("slots"), pk.pack(m.slots);
          pk.pack("pid"), pk.pack(m.pid);
        } else if constexpr (std::is_same_v<M, Heartbeat>) {
          Header(pk, kRunnerProtocolVersion, "heartbeat", 1);
          pk.pack("busy"), pk.pack(m.busy);
        } else {
          Header(pk, kRunnerProtocolVersion, "result", 2);
          pk.pack("job_id"), pk.pack(m.job_id), pk.pack("result");
          PackJson(pk, ResultToJson(m.result, /*include_samples=*/true));
        }
      },
      message);
  return Bytes(buffer);
}

std::string Encode(const ToRunner& message) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Welcome>) {
          Header(pk, kRunnerProtocolVersion, "welcome", 1);
          pk.pack("heartbeat_interval_s"), pk.pack(m.heartbeat_interval_s);
        } else if constexpr (std::is_same_v<M, Job>) {
          Header(pk, kRunnerProtocolVersion, "job", 5);
          pk.pack("job_id"), pk.pack(m.job_id), pk.pack("backend"), pk.pack(m.backend);
          pk.pack("task"), pk.pack(m.task), pk.pack("source"), pk.pack(m.source), pk.pack("options");
          const JobOptions& o = m.options;
          pk.pack_map(6);
          pk.pack("seeds"), pk.pack(o.seeds), pk.pack("timing_seed"), pk.pack(o.timing_seed);
          pk.pack("run_timing"), pk.pack(o.run_timing), pk.pack("timing_budget_s"), pk.pack(o.timing_budget_s);
          pk.pack("min_rounds"), pk.pack(o.min_rounds), pk.pack("target_relative_ci"), pk.pack(o.target_relative_ci);
        } else if constexpr (std::is_same_v<M, Ack>) {
          Header(pk, kRunnerProtocolVersion, "ack", 0);
        } else {
          Header(pk, kRunnerProtocolVersion, "reregister", 0);
        }
      },
      message);
  return Bytes(buffer);
}

std::optional<FromRunner> DecodeFromRunner(std::string_view bytes, std::string& problem) {
  try {
    msgpack::object_handle handle;
    int v = 0;
    const std::string op = OpenEnvelope(bytes, handle, v);
    return DecodeFromRunnerBody(op, v, handle.get());
  } catch (const DecodeFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {  // a bug in the codec must still be an answer, not a crash
    problem = std::string("decoding failed: ") + e.what();
  }
  return std::nullopt;
}

std::optional<ToRunner> DecodeToRunner(std::string_view bytes, std::string& problem) {
  try {
    msgpack::object_handle handle;
    int v = 0;
    const std::string op = OpenEnvelope(bytes, handle, v);
    return DecodeToRunnerBody(op, handle.get());
  } catch (const DecodeFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {
    problem = std::string("decoding failed: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace kernelgym::protocol::runner
