#include "env/protocol/codec.h"

#include <cstring>
#include <optional>

#include "env/protocol/msgpack_tree.h"

namespace kernelgym::protocol {
namespace {

using nlohmann::json;

using detail::DecodeFailure;
using detail::Fields;
using detail::kUnpackLimits;
using detail::Packer;
using detail::PackJson;
using detail::QuotedText;
using detail::RequireUtf8Text;
using detail::ToJson;
using detail::TypeName;

Action DecodeAction(const msgpack::object& o, const std::string& where) {
  Fields f(o, where);
  const std::string kind = f.String("kind");
  Action action;
  if (kind == "replace") {
    action = ReplaceAction{f.String("source")};
  } else if (kind == "edit") {
    const msgpack::object& edits = f.Require("edits");
    if (edits.type != msgpack::type::ARRAY || edits.via.array.size == 0) f.Fail("field 'edits' must be a non-empty array");
    EditAction edit;
    for (uint32_t i = 0; i < edits.via.array.size; ++i) {
      Fields block(edits.via.array.ptr[i], where + ".edits[" + std::to_string(i) + "]");
      edit.edits.push_back({block.String("search"), block.String("replace")});
      block.Finish();
    }
    action = std::move(edit);
  } else if (kind == "patch") {
    action = PatchAction{f.String("diff")};
  } else if (kind == "knobs") {
    const msgpack::object& values = f.Require("values");
    Fields knobs(values, where + ".values");
    KnobsAction k;
    for (uint32_t i = 0; i < values.via.map.size; ++i) {
      const msgpack::object_kv& kv = values.via.map.ptr[i];
      const std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
      if (kv.val.type == msgpack::type::STR) k.values[name] = std::string(kv.val.via.str.ptr, kv.val.via.str.size);
      else if (kv.val.type == msgpack::type::FLOAT32 || kv.val.type == msgpack::type::FLOAT64) k.values[name] = kv.val.via.f64;
      else k.values[name] = knobs.AsInt(kv.val, name);
    }
    action = std::move(k);
  } else if (kind == "revert") {
    action = RevertAction{f.Int("to_step")};
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
  if (op == "tasks.list") return TasksListRequest{f.StringOr("suite", "")};
  if (op == "tasks.get") return TasksGetRequest{f.String("task")};
  if (op == "env.make") {
    EnvMakeRequest r;
    r.task = f.String("task");
    r.backend = f.StringOr("backend", r.backend);
    r.reward = f.StringOr("reward", r.reward);
    if (const msgpack::object* c = f.Find("reward_config")) {
      if (c->type != msgpack::type::MAP) f.FieldType("reward_config", "a map", *c);
      r.reward_config = ToJson(*c, f.where() + ".reward_config");
    }
    r.max_steps = f.IntOr("max_steps", 0);
    if (r.max_steps < 0) f.Fail("field 'max_steps' must be >= 0");
    r.time_budget_s = f.NumberOr("time_budget_s", 0);
    if (r.time_budget_s < 0) f.Fail("field 'time_budget_s' must be >= 0");
    r.record = f.BoolOr("record", false);
    return r;
  }
  if (op == "env.reset") {
    EnvResetRequest r;
    r.env = f.String("env");
    if (const msgpack::object* s = f.Find("seed"); s && s->type != msgpack::type::NIL) r.seed = f.AsUnsigned(*s, "seed");
    return r;
  }
  if (op == "env.step") {
    EnvStepRequest r{f.String("env"), DecodeAction(f.Require("action"), f.where() + ".action")};
    if (const msgpack::object* m = f.Find("meta")) {
      if (m->type != msgpack::type::MAP) f.FieldType("meta", "a map", *m);
      r.meta = ToJson(*m, f.where() + ".meta");
    }
    return r;
  }
  if (op == "env.fork") return EnvForkRequest{f.String("env")};
  if (op == "env.close") return EnvCloseRequest{f.String("env")};
  if (op == "stats") return StatsRequest{};
  if (op == "health") return HealthRequest{};
  throw DecodeFailure{"unknown op " + QuotedText(op), ErrorCode::kUnknownOp};
}

// A float64 whatever its value. msgpack-c's pack_double writes a double with an integral value
// (32768.0) as an integer, so a float knob value would come back as an integer one (found by the
// request fuzzer): the 0xcb marker and the big-endian bits are written as they are.
void PackFloat64(Packer& pk, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  char bytes[9];
  bytes[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
  pk.pack_str_body(bytes, sizeof bytes);  // appends the bytes, no header of its own
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
            std::visit(
                [&](const auto& v) {
                  if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) PackFloat64(pk, v);
                  else pk.pack(v);
                },
                value);
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
        if constexpr (std::is_same_v<B, HelloRequest> || std::is_same_v<B, StatsRequest> ||
                      std::is_same_v<B, HealthRequest>) {
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
          header(3);
          pk.pack("env"), pk.pack(b.env), pk.pack("action");
          PackAction(pk, b.action);
          pk.pack("meta");
          PackJson(pk, b.meta);
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

// Reads the top-level "id" of a request without building it: for a request the decoder refused
// before it could read the id (more elements than kUnpackLimits allows, a duplicated key), so that
// every request whose id can be read is answered with it. Allocates nothing, stops at the id.
class IdScanner : public msgpack::null_visitor {
 public:
  std::optional<uint64_t> id;

  bool start_map(uint32_t) { return ++depth_, true; }
  bool end_map() { return --depth_, true; }
  bool start_array(uint32_t) { return ++depth_, true; }
  bool end_array() { return --depth_, true; }
  bool start_map_key() { return in_top_key_ = depth_ == 1, true; }
  bool end_map_key() { return in_top_key_ = false, true; }
  bool visit_str(const char* text, uint32_t size) {
    if (in_top_key_) next_value_is_id_ = std::string_view(text, size) == "id";
    return true;
  }
  bool visit_positive_integer(uint64_t value) {
    if (depth_ != 1 || in_top_key_ || !next_value_is_id_) return true;
    id = value;
    return false;  // found: stop parsing
  }
  bool end_map_value() {
    if (depth_ == 1) next_value_is_id_ = false;
    return true;
  }
  void parse_error(size_t, size_t) {}
  void insufficient_bytes(size_t, size_t) {}

 private:
  int depth_ = 0;
  bool in_top_key_ = false, next_value_is_id_ = false;
};

}  // namespace

uint64_t ScanRequestId(std::string_view bytes) {
  // Any size the socket delivers (the scan stops at the id, and allocates nothing): an oversized
  // request is answered with its id too.
  IdScanner scanner;
  std::size_t offset = 0;
  msgpack::parse(bytes.data(), bytes.size(), offset, scanner);
  return scanner.id.value_or(0);
}

DecodedRequest DecodeRequest(std::string_view bytes) {
  DecodedRequest out;
  try {
    if (bytes.size() > kMaxMessageBytes)
      throw DecodeFailure{"message of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                          std::to_string(kMaxMessageBytes) + "-byte limit"};
    std::size_t offset = 0;
    msgpack::object_handle handle;
    try {
      handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kUnpackLimits);
    } catch (const msgpack::size_overflow& e) {
      // Named, with the limits (docs/protocol.md, "Limits"): the message itself may be valid.
      throw DecodeFailure{std::string("the message exceeds a limit: ") + e.what() +
                          " (at most 65,536 elements per array, 4,096 entries per map, 32 levels of nesting)"};
    } catch (const std::exception& e) {
      throw DecodeFailure{std::string("not a valid msgpack message: ") + e.what()};
    }
    if (offset != bytes.size()) throw DecodeFailure{"trailing bytes after the message"};
    Fields f(handle.get(), "request");
    // id and op first, so that every later error can name them.
    if (const msgpack::object* id = f.Find("id"); id && id->type == msgpack::type::POSITIVE_INTEGER) out.id = id->via.u64;
    RequireUtf8Text(handle.get(), "request");
    const std::string op = f.String("op");
    if (!IsKnownOp(op)) throw DecodeFailure{"unknown op " + QuotedText(op), ErrorCode::kUnknownOp};
    out.op = op;
    Fields body(handle.get(), out.op);
    // Any integer that is not this version is a version this server does not speak.
    const msgpack::object& v_field = body.Require("v");
    const bool integer = v_field.type == msgpack::type::POSITIVE_INTEGER || v_field.type == msgpack::type::NEGATIVE_INTEGER;
    if (!integer) body.FieldType("v", "an integer", v_field);
    const bool this_version = v_field.type == msgpack::type::POSITIVE_INTEGER && v_field.via.u64 == static_cast<uint64_t>(kVersion);
    if (!this_version)
      throw DecodeFailure{out.op + ": protocol version " +
                              (v_field.type == msgpack::type::POSITIVE_INTEGER ? std::to_string(v_field.via.u64)
                                                                              : std::to_string(v_field.via.i64)) +
                              " is not supported (this server speaks " + std::to_string(kVersion) + ")",
                          ErrorCode::kUnsupportedVersion};
    Request request;
    request.v = kVersion;
    request.id = body.Unsigned("id");
    // 0 marks a reply to a request whose id could not be read: a request may not use it.
    if (request.id == 0) body.Fail("field 'id' must be >= 1 (0 marks a reply to an unreadable request)");
    body.Find("op");
    request.body = DecodeBody(out.op, body);
    body.Finish();
    out.request = std::move(request);
  } catch (const DecodeFailure& failure) {
    out.error = {failure.code, failure.message, {}};
    if (!out.op.empty()) out.error.details["op"] = out.op;
    if (out.id == 0) out.id = ScanRequestId(bytes);
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

namespace {

// Keys in byte order, as PackJson emits a JSON object's keys (the canonical encoding).
void PackObservation(Packer& pk, const Observation& o) {
  pk.pack_map(16);
  pk.pack("action_error"), pk.pack(o.action_error);
  pk.pack("best_speedup"), pk.pack(o.best_speedup);
  pk.pack("features"), pk.pack_array(static_cast<uint32_t>(o.features.size()));
  for (double f : o.features) pk.pack(f);
  pk.pack("message"), pk.pack(o.message);
  pk.pack("report"), PackJson(pk, o.report);
  pk.pack("reused"), pk.pack(o.reused);
  pk.pack("seconds_left"), pk.pack(o.seconds_left);
  pk.pack("source"), pk.pack(o.source);
  pk.pack("speedup"), pk.pack(o.speedup);
  pk.pack("speedup_ci_high"), pk.pack(o.speedup_ci_high);
  pk.pack("speedup_ci_low"), pk.pack(o.speedup_ci_low);
  pk.pack("stage"), pk.pack(o.stage);
  pk.pack("status"), pk.pack(o.status);
  pk.pack("step"), pk.pack(o.step);
  pk.pack("steps_left"), pk.pack(o.steps_left);
  pk.pack("text"), pk.pack(o.text);
}

void PackSuccessEnvelope(Packer& pk, uint64_t id) {
  pk.pack_map(4);
  pk.pack("v"), pk.pack(kVersion), pk.pack("id"), pk.pack(id), pk.pack("ok"), pk.pack(true), pk.pack("result");
}

}  // namespace

std::string EncodeReply(uint64_t id, const ResetResult& result) {
  msgpack::sbuffer buffer(4096);
  Packer pk(buffer);
  PackSuccessEnvelope(pk, id);
  pk.pack_map(2);
  pk.pack("info"), PackJson(pk, result.info);
  pk.pack("observation"), PackObservation(pk, result.observation);
  return std::string(buffer.data(), buffer.size());
}

std::string EncodeReply(uint64_t id, const StepResult& result) {
  msgpack::sbuffer buffer(4096);
  Packer pk(buffer);
  PackSuccessEnvelope(pk, id);
  pk.pack_map(5);
  pk.pack("info"), PackJson(pk, result.info);
  pk.pack("observation"), PackObservation(pk, result.observation);
  pk.pack("reward"), pk.pack(result.reward);
  pk.pack("terminated"), pk.pack(result.terminated);
  pk.pack("truncated"), pk.pack(result.truncated);
  return std::string(buffer.data(), buffer.size());
}

DecodedReply DecodeReply(std::string_view bytes) {
  DecodedReply out;
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kUnpackLimits);
    if (offset != bytes.size()) throw DecodeFailure{"trailing bytes after the reply"};
    Fields f(handle.get(), "reply");
    // The id first, so that a reply that is wrong further on can still be matched to its request.
    if (const msgpack::object* id = f.Find("id"); id && id->type == msgpack::type::POSITIVE_INTEGER) out.id = id->via.u64;
    if (f.Int("v") != kVersion) f.Fail("unsupported protocol version");
    out.id = f.Unsigned("id");
    out.ok = f.BoolOr("ok", false);
    if (out.ok) {
      msgpack::sbuffer buffer;
      Packer pk(buffer);
      pk.pack(f.Require("result"));
      out.result.assign(buffer.data(), buffer.size());
    } else {
      Fields e(f.Require("error"), "reply.error");
      const std::string code = e.String("code");
      const auto parsed = ParseErrorCode(code);
      if (!parsed) e.Fail("unknown error code '" + code + "'");
      out.error.code = *parsed;
      out.error.message = e.String("message");
      if (const msgpack::object* d = e.Find("details")) {
        Fields details(*d, "reply.error.details");
        for (uint32_t i = 0; i < d->via.map.size; ++i) {
          const msgpack::object_kv& kv = d->via.map.ptr[i];
          const std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
          out.error.details[key] = details.AsString(kv.val, key);
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
      handle = msgpack::unpack(result_bytes.data(), result_bytes.size(), offset, nullptr, nullptr, kUnpackLimits);
    } catch (const std::exception& e) {
      throw DecodeFailure{std::string("result: not valid msgpack: ") + e.what()};
    }
    if (offset != result_bytes.size()) throw DecodeFailure{"result: trailing bytes"};
    if (handle.get().type != msgpack::type::MAP)
      throw DecodeFailure{"result: must be a map, not " + TypeName(handle.get())};
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
