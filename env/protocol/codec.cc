#include "env/protocol/codec.h"

#include <msgpack.hpp>

#include <array>
#include <cmath>
#include <set>

namespace kernelgym::protocol {
namespace {

using nlohmann::json;

// Thrown inside this file only; DecodeRequest turns it into an Error.
struct DecodeFailure {
  ErrorCode code;
  std::string message;
};

const msgpack::unpack_limit kLimits(/*array=*/1 << 16, /*map=*/1 << 12, /*str=*/kMaxMessageBytes,
                                    /*bin=*/kMaxMessageBytes, /*ext=*/0, /*depth=*/32);

std::string TypeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "bytes";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    default: return "an extension";
  }
}

// The fields of one msgpack map, read strictly: wrong types and (at Finish) unknown keys fail,
// naming `where` (the op, or the op and a nested field).
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

  const msgpack::object* Find(const std::string& key) {
    used_.insert(key);
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second;
  }
  const msgpack::object& Require(const std::string& key) {
    const msgpack::object* o = Find(key);
    if (!o) Fail("needs the field '" + key + "'");
    return *o;
  }

  std::string String(const std::string& key, bool required, std::string fallback = {}) {
    const msgpack::object* o = required ? &Require(key) : Find(key);
    if (!o) return fallback;
    if (o->type != msgpack::type::STR) FieldType(key, "a string", *o);
    return std::string(o->via.str.ptr, o->via.str.size);
  }
  int64_t Int(const std::string& key, bool required, int64_t fallback = 0) {
    const msgpack::object* o = required ? &Require(key) : Find(key);
    if (!o) return fallback;
    if (o->type == msgpack::type::POSITIVE_INTEGER) {
      if (o->via.u64 > static_cast<uint64_t>(INT64_MAX)) Fail("field '" + key + "' is out of range");
      return static_cast<int64_t>(o->via.u64);
    }
    if (o->type == msgpack::type::NEGATIVE_INTEGER) return o->via.i64;
    FieldType(key, "an integer", *o);
    return 0;
  }
  uint64_t Unsigned(const std::string& key, bool required, uint64_t fallback = 0) {
    const msgpack::object* o = required ? &Require(key) : Find(key);
    if (!o) return fallback;
    if (o->type != msgpack::type::POSITIVE_INTEGER) FieldType(key, "a non-negative integer", *o);
    return o->via.u64;
  }
  double Number(const std::string& key, double fallback) {
    const msgpack::object* o = Find(key);
    if (!o) return fallback;
    double x;
    if (o->type == msgpack::type::FLOAT32 || o->type == msgpack::type::FLOAT64) x = o->via.f64;
    else if (o->type == msgpack::type::POSITIVE_INTEGER) x = static_cast<double>(o->via.u64);
    else if (o->type == msgpack::type::NEGATIVE_INTEGER) x = static_cast<double>(o->via.i64);
    else return FieldType(key, "a number", *o), 0;
    if (!std::isfinite(x)) Fail("field '" + key + "' must be finite");
    return x;
  }
  bool Bool(const std::string& key, bool fallback) {
    const msgpack::object* o = Find(key);
    if (!o) return fallback;
    if (o->type != msgpack::type::BOOLEAN) FieldType(key, "a boolean", *o);
    return o->via.boolean;
  }

  void Finish() {
    for (const auto& [key, value] : entries_)
      if (!used_.count(key)) Fail("has an unknown field '" + key + "'");
  }

  [[noreturn]] void Fail(const std::string& what) const { throw DecodeFailure{ErrorCode::kBadRequest, where_ + ": " + what}; }
  [[noreturn]] void FieldType(const std::string& key, const std::string& want, const msgpack::object& got) const {
    Fail("field '" + key + "' must be " + want + ", not " + TypeName(got));
  }
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  std::map<std::string, const msgpack::object*> entries_;
  std::set<std::string> used_;
};

// reward_config and other free-form maps: msgpack -> JSON value (config I/O).
json ToJson(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::NIL: return nullptr;
    case msgpack::type::BOOLEAN: return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER: return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER: return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o.via.f64;
    case msgpack::type::STR: return std::string(o.via.str.ptr, o.via.str.size);
    case msgpack::type::ARRAY: {
      json a = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(ToJson(o.via.array.ptr[i], where));
      return a;
    }
    case msgpack::type::MAP: {
      json m = json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) throw DecodeFailure{ErrorCode::kBadRequest, where + ": map keys must be strings"};
        std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
        if (m.contains(key)) throw DecodeFailure{ErrorCode::kBadRequest, where + ": has the key '" + key + "' twice"};
        m[std::move(key)] = ToJson(kv.val, where);
      }
      return m;
    }
    default: throw DecodeFailure{ErrorCode::kBadRequest, where + ": " + TypeName(o) + " is not allowed here"};
  }
}

using Packer = msgpack::packer<msgpack::sbuffer>;

void PackJson(Packer& pk, const json& j) {
  switch (j.type()) {
    case json::value_t::null: pk.pack_nil(); break;
    case json::value_t::boolean: pk.pack(j.get<bool>()); break;
    case json::value_t::number_unsigned: pk.pack(j.get<uint64_t>()); break;
    case json::value_t::number_integer: pk.pack(j.get<int64_t>()); break;
    case json::value_t::number_float: pk.pack(j.get<double>()); break;
    case json::value_t::string: pk.pack(j.get<std::string>()); break;
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
    default: pk.pack_nil(); break;
  }
}

Action DecodeAction(const msgpack::object& o, const std::string& where) {
  Fields f(o, where);
  const std::string kind = f.String("kind", true);
  Action action;
  if (kind == "replace") {
    action = ReplaceAction{f.String("source", true)};
  } else if (kind == "edit") {
    const msgpack::object& edits = f.Require("edits");
    if (edits.type != msgpack::type::ARRAY || edits.via.array.size == 0) f.Fail("field 'edits' must be a non-empty array");
    EditAction edit;
    for (uint32_t i = 0; i < edits.via.array.size; ++i) {
      Fields block(edits.via.array.ptr[i], where + ".edits[" + std::to_string(i) + "]");
      edit.edits.push_back({block.String("search", true), block.String("replace", true)});
      block.Finish();
    }
    action = std::move(edit);
  } else if (kind == "patch") {
    action = PatchAction{f.String("diff", true)};
  } else if (kind == "knobs") {
    const msgpack::object& values = f.Require("values");
    Fields knobs(values, where + ".values");
    KnobsAction k;
    for (uint32_t i = 0; i < values.via.map.size; ++i) {
      const msgpack::object_kv& kv = values.via.map.ptr[i];
      const std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
      if (kv.val.type == msgpack::type::STR) k.values[name] = std::string(kv.val.via.str.ptr, kv.val.via.str.size);
      else if (kv.val.type == msgpack::type::FLOAT32 || kv.val.type == msgpack::type::FLOAT64) k.values[name] = kv.val.via.f64;
      else k.values[name] = knobs.Int(name, true);
      knobs.Find(name);
    }
    action = std::move(k);
  } else if (kind == "revert") {
    action = RevertAction{f.Int("to_step", true)};
  } else if (kind == "submit") {
    action = SubmitAction{};
  } else {
    f.Fail("unknown action kind '" + kind + "' (replace, edit, patch, knobs, revert, submit)");
  }
  f.Finish();
  return action;
}

RequestBody DecodeBody(const std::string& op, Fields& f) {
  if (op == "hello") return HelloRequest{};
  if (op == "tasks.list") return TasksListRequest{f.String("suite", false)};
  if (op == "tasks.get") return TasksGetRequest{f.String("task", true)};
  if (op == "env.make") {
    EnvMakeRequest r;
    r.task = f.String("task", true);
    r.backend = f.String("backend", false, r.backend);
    r.reward = f.String("reward", false, r.reward);
    if (const msgpack::object* c = f.Find("reward_config")) {
      if (c->type != msgpack::type::MAP) f.FieldType("reward_config", "a map", *c);
      r.reward_config = ToJson(*c, f.where() + ".reward_config");
    }
    r.max_steps = f.Int("max_steps", false, 0);
    if (r.max_steps < 0) f.Fail("field 'max_steps' must be >= 0");
    r.time_budget_s = f.Number("time_budget_s", 0);
    if (r.time_budget_s < 0) f.Fail("field 'time_budget_s' must be >= 0");
    r.record = f.Bool("record", false);
    return r;
  }
  if (op == "env.reset") {
    EnvResetRequest r;
    r.env = f.String("env", true);
    if (const msgpack::object* s = f.Find("seed"); s && s->type != msgpack::type::NIL) r.seed = f.Unsigned("seed", true);
    return r;
  }
  if (op == "env.step") return EnvStepRequest{f.String("env", true), DecodeAction(f.Require("action"), f.where() + ".action")};
  if (op == "env.fork") return EnvForkRequest{f.String("env", true)};
  if (op == "env.close") return EnvCloseRequest{f.String("env", true)};
  if (op == "stats") return StatsRequest{};
  throw DecodeFailure{ErrorCode::kUnknownOp, "unknown op '" + op + "'"};
}

void PackAction(Packer& pk, const Action& action) {
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, ReplaceAction>) {
          pk.pack_map(2);
          pk.pack("kind"), pk.pack("replace"), pk.pack("source"), pk.pack(a.source);
        } else if constexpr (std::is_same_v<A, EditAction>) {
          pk.pack_map(2);
          pk.pack("kind"), pk.pack("edit"), pk.pack("edits");
          pk.pack_array(static_cast<uint32_t>(a.edits.size()));
          for (const EditBlock& b : a.edits) {
            pk.pack_map(2);
            pk.pack("search"), pk.pack(b.search), pk.pack("replace"), pk.pack(b.replace);
          }
        } else if constexpr (std::is_same_v<A, PatchAction>) {
          pk.pack_map(2);
          pk.pack("kind"), pk.pack("patch"), pk.pack("diff"), pk.pack(a.diff);
        } else if constexpr (std::is_same_v<A, KnobsAction>) {
          pk.pack_map(2);
          pk.pack("kind"), pk.pack("knobs"), pk.pack("values");
          pk.pack_map(static_cast<uint32_t>(a.values.size()));
          for (const auto& [name, value] : a.values) {
            pk.pack(name);
            std::visit([&](const auto& v) { pk.pack(v); }, value);
          }
        } else if constexpr (std::is_same_v<A, RevertAction>) {
          pk.pack_map(2);
          pk.pack("kind"), pk.pack("revert"), pk.pack("to_step"), pk.pack(a.to_step);
        } else {
          pk.pack_map(1);
          pk.pack("kind"), pk.pack("submit");
        }
      },
      action);
}

// Envelope fields first (v, id, op), then the op's fields in declared order: one canonical
// encoding per message, which is what the golden fixtures pin down.
void PackBody(Packer& pk, const Request& r) {
  std::visit(
      [&](const auto& b) {
        using B = std::decay_t<decltype(b)>;
        auto header = [&](uint32_t fields) {
          pk.pack_map(3 + fields);
          pk.pack("v"), pk.pack(r.v), pk.pack("id"), pk.pack(r.id), pk.pack("op"), pk.pack(std::string(OpName(r.body)));
        };
        if constexpr (std::is_same_v<B, HelloRequest> || std::is_same_v<B, StatsRequest>) {
          header(0);
        } else if constexpr (std::is_same_v<B, TasksListRequest>) {
          header(1);
          pk.pack("suite"), pk.pack(b.suite);
        } else if constexpr (std::is_same_v<B, TasksGetRequest>) {
          header(1);
          pk.pack("task"), pk.pack(b.task);
        } else if constexpr (std::is_same_v<B, EnvMakeRequest>) {
          header(7);
          pk.pack("task"), pk.pack(b.task), pk.pack("backend"), pk.pack(b.backend), pk.pack("reward"), pk.pack(b.reward);
          pk.pack("reward_config");
          PackJson(pk, b.reward_config);
          pk.pack("max_steps"), pk.pack(b.max_steps), pk.pack("time_budget_s"), pk.pack(b.time_budget_s);
          pk.pack("record"), pk.pack(b.record);
        } else if constexpr (std::is_same_v<B, EnvResetRequest>) {
          header(2);
          pk.pack("env"), pk.pack(b.env), pk.pack("seed");
          if (b.seed) pk.pack(*b.seed);
          else pk.pack_nil();
        } else if constexpr (std::is_same_v<B, EnvStepRequest>) {
          header(2);
          pk.pack("env"), pk.pack(b.env), pk.pack("action");
          PackAction(pk, b.action);
        } else {  // env.fork, env.close
          header(1);
          pk.pack("env"), pk.pack(b.env);
        }
      },
      r.body);
}

void PackError(Packer& pk, const Error& e) {
  pk.pack_map(3);
  pk.pack("code"), pk.pack(std::string(ErrorCodeName(e.code)));
  pk.pack("message"), pk.pack(e.message);
  pk.pack("details"), pk.pack(e.details);
}

}  // namespace

DecodedRequest DecodeRequest(std::string_view bytes) {
  DecodedRequest out;
  try {
    if (bytes.size() > kMaxMessageBytes)
      throw DecodeFailure{ErrorCode::kBadRequest, "message of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                                                      std::to_string(kMaxMessageBytes) + "-byte limit"};
    std::size_t offset = 0;
    msgpack::object_handle handle;
    try {
      handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kLimits);
    } catch (const std::exception& e) {
      throw DecodeFailure{ErrorCode::kBadRequest, std::string("not a valid msgpack message: ") + e.what()};
    }
    if (offset != bytes.size()) throw DecodeFailure{ErrorCode::kBadRequest, "trailing bytes after the message"};
    Fields f(handle.get(), "request");
    // id and op first, so that every later error can name them.
    if (const msgpack::object* id = f.Find("id"); id && id->type == msgpack::type::POSITIVE_INTEGER) out.id = id->via.u64;
    out.op = f.String("op", true);
    Fields body(handle.get(), out.op);
    const int64_t v = body.Int("v", true);
    if (v != kVersion)
      throw DecodeFailure{ErrorCode::kUnsupportedVersion, out.op + ": protocol version " + std::to_string(v) +
                                                              " is not supported (this server speaks " +
                                                              std::to_string(kVersion) + ")"};
    Request request;
    request.v = static_cast<int>(v);
    request.id = body.Unsigned("id", true);
    body.Find("op");
    request.body = DecodeBody(out.op, body);
    body.Finish();
    out.request = std::move(request);
  } catch (const DecodeFailure& failure) {
    out.error = {failure.code, failure.message, {}};
    if (!out.op.empty()) out.error.details["op"] = out.op;
  } catch (const std::exception& e) {  // a bug in the codec must still be an answer, not a crash
    out.error = {ErrorCode::kInternal, std::string("decoding failed: ") + e.what(), {}};
  }
  return out;
}

std::string EncodeRequest(const Request& request) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  PackBody(pk, request);
  return std::string(buffer.data(), buffer.size());
}

std::string EncodeErrorReply(uint64_t id, const Error& error) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_map(4);
  pk.pack("v"), pk.pack(kVersion), pk.pack("id"), pk.pack(id), pk.pack("ok"), pk.pack(false), pk.pack("error");
  PackError(pk, error);
  return std::string(buffer.data(), buffer.size());
}

std::string EncodeResultReply(uint64_t id, const nlohmann::json& result) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_map(4);
  pk.pack("v"), pk.pack(kVersion), pk.pack("id"), pk.pack(id), pk.pack("ok"), pk.pack(true), pk.pack("result");
  PackJson(pk, result);
  return std::string(buffer.data(), buffer.size());
}

std::string EncodeHelloReply(uint64_t id, const HelloResult& result) { return EncodeResultReply(id, ToWire(result)); }

DecodedReply DecodeReply(std::string_view bytes) {
  DecodedReply out;
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kLimits);
    if (offset != bytes.size()) throw DecodeFailure{ErrorCode::kBadRequest, "trailing bytes after the reply"};
    Fields f(handle.get(), "reply");
    // The id first, so that a reply that is wrong further on can still be matched to its request.
    if (const msgpack::object* id = f.Find("id"); id && id->type == msgpack::type::POSITIVE_INTEGER) out.id = id->via.u64;
    if (f.Int("v", true) != kVersion) f.Fail("unsupported protocol version");
    out.id = f.Unsigned("id", true);
    out.ok = f.Bool("ok", false);
    if (out.ok) {
      msgpack::sbuffer buffer;
      Packer pk(buffer);
      pk.pack(f.Require("result"));
      out.result.assign(buffer.data(), buffer.size());
    } else {
      Fields e(f.Require("error"), "reply.error");
      const std::string code = e.String("code", true);
      const auto parsed = ParseErrorCode(code);
      if (!parsed) e.Fail("unknown error code '" + code + "'");
      out.error.code = *parsed;
      out.error.message = e.String("message", true);
      if (const msgpack::object* d = e.Find("details")) {
        Fields details(*d, "reply.error.details");
        for (uint32_t i = 0; i < d->via.map.size; ++i) {
          const msgpack::object_kv& kv = d->via.map.ptr[i];
          const std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
          out.error.details[key] = details.String(key, true);
        }
      }
      e.Finish();
    }
    f.Finish();
    out.valid = true;
  } catch (const DecodeFailure& failure) {
    out.problem = failure.message;
  } catch (const std::exception& e) {
    out.problem = std::string("not a valid msgpack reply: ") + e.what();
  }
  return out;
}

std::optional<json> DecodeResultTree(std::string_view result_bytes, std::string& problem) {
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle;
    try {
      handle = msgpack::unpack(result_bytes.data(), result_bytes.size(), offset, nullptr, nullptr, kLimits);
    } catch (const std::exception& e) {
      throw DecodeFailure{ErrorCode::kBadRequest, std::string("result: not valid msgpack: ") + e.what()};
    }
    if (offset != result_bytes.size()) throw DecodeFailure{ErrorCode::kBadRequest, "result: trailing bytes"};
    if (handle.get().type != msgpack::type::MAP)
      throw DecodeFailure{ErrorCode::kBadRequest, "result: must be a map, not " + TypeName(handle.get())};
    return ToJson(handle.get(), "result");
  } catch (const DecodeFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {
    problem = std::string("result: ") + e.what();
  }
  return std::nullopt;
}

std::optional<HelloResult> DecodeHelloResult(std::string_view bytes, std::string& problem) {
  const std::optional<json> tree = DecodeResultTree(bytes, problem);
  if (!tree) return std::nullopt;
  return HelloResultFromWire(*tree, problem);
}

std::optional<HelloResult> DecodeHelloResult(std::string_view bytes) {
  std::string problem;
  return DecodeHelloResult(bytes, problem);
}

}  // namespace kernelgym::protocol
