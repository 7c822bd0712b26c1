// The client protocol codec: golden fixtures (the same files the Python client decodes) and
// every kind of bad input, which must become an error naming the op and the field.
#include <gtest/gtest.h>

#include "core/text_safety.h"

#include <fstream>
#include <functional>
#include <msgpack.hpp>
#include <random>
#include <sstream>

#include "golden.h"

namespace kernelgym::protocol {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(KERNELGYM_SOURCE_DIR) + "/tests/fixtures/protocol/" + name + ".msgpack", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A message built field by field, for the malformed cases.
std::string Pack(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  write(pk);
  return std::string(buffer.data(), buffer.size());
}

TEST(ProtocolGolden, EveryRequestFixtureDecodesToItsMessageAndBack) {
  for (const auto& f : golden::Requests()) {
    const std::string bytes = Fixture(f.name);
    ASSERT_FALSE(bytes.empty()) << f.name << ".msgpack is missing: run kernelgym-protocol-fixtures";
    const DecodedRequest decoded = DecodeRequest(bytes);
    ASSERT_TRUE(decoded.request) << f.name << ": " << decoded.error.message;
    EXPECT_EQ(*decoded.request, f.request) << f.name;
    EXPECT_EQ(EncodeRequest(f.request), bytes) << f.name << ": the encoding changed; regenerate the fixtures on purpose";
  }
}

TEST(ProtocolGolden, ReplyFixturesAreTheCanonicalEncoding) {
  for (const auto& f : golden::Replies()) {
    const std::string bytes = Fixture(f.name);
    ASSERT_FALSE(bytes.empty()) << f.name << ".msgpack is missing: run kernelgym-protocol-fixtures";
    EXPECT_EQ(bytes, f.bytes) << f.name << ": the encoding changed; regenerate the fixtures on purpose";
  }
}

TEST(ProtocolGolden, EveryReplyFixtureDecodesToItsValueAndBack) {
  int ok_replies = 0;
  for (const auto& f : golden::Replies()) {
    const std::string bytes = Fixture(f.name);
    const DecodedReply reply = DecodeReply(bytes);
    ASSERT_TRUE(reply.valid) << f.name << ": " << reply.problem;
    EXPECT_EQ(reply.id, f.id) << f.name;
    ASSERT_EQ(reply.ok, f.ok) << f.name;
    if (!f.ok) {
      EXPECT_EQ(reply.error, f.error) << f.name;
      EXPECT_EQ(EncodeErrorReply(reply.id, reply.error), bytes) << f.name;
      continue;
    }
    ++ok_replies;
    std::string problem;
    const std::optional<nlohmann::json> tree = DecodeResultTree(reply.result, problem);
    ASSERT_TRUE(tree) << f.name << ": " << problem;
    EXPECT_TRUE(tree->is_object()) << f.name;
    EXPECT_EQ(*tree, f.result) << f.name;
    EXPECT_EQ(EncodeResultReply(reply.id, *tree), bytes) << f.name << ": the decoded tree re-encodes differently";
  }
  EXPECT_GE(ok_replies, 9);
}

// Decodes a reply fixture to its result tree (asserting on the way).
nlohmann::json ResultTree(const std::string& name) {
  const DecodedReply reply = DecodeReply(Fixture(name));
  EXPECT_TRUE(reply.valid && reply.ok) << name << ": " << reply.problem;
  std::string problem;
  const auto tree = DecodeResultTree(reply.result, problem);
  EXPECT_TRUE(tree) << name << ": " << problem;
  return tree.value_or(nlohmann::json());
}

TEST(ProtocolGolden, TypedResultsDecodeExactlyAndReencodeToTheirBytes) {
  std::string problem;
  const auto hello = HelloResultFromWire(ResultTree("reply_hello"), problem);
  ASSERT_TRUE(hello) << problem;
  EXPECT_EQ(*hello, golden::Hello());
  EXPECT_EQ(hello->feature_names.size(), golden::Step().observation.features.size());
  EXPECT_EQ(hello->max_message_bytes, kMaxMessageBytes);
  EXPECT_EQ(EncodeHelloReply(1, *hello), Fixture("reply_hello"));
  const DecodedReply hello_reply = DecodeReply(Fixture("reply_hello"));
  EXPECT_EQ(DecodeHelloResult(hello_reply.result), golden::Hello());

  const auto made = EnvInfoFromWire(ResultTree("reply_env_make"), problem);
  ASSERT_TRUE(made) << problem;
  EXPECT_EQ(*made, golden::MadeEnv());
  EXPECT_EQ(EncodeResultReply(4, ToWire(*made)), Fixture("reply_env_make"));
  const auto forked = EnvInfoFromWire(ResultTree("reply_env_fork"), problem);
  ASSERT_TRUE(forked) << problem;
  EXPECT_EQ(forked->env, "env-2");

  const auto reset = ResetResultFromWire(ResultTree("reply_env_reset"), problem);
  ASSERT_TRUE(reset) << problem;
  EXPECT_EQ(*reset, golden::Reset());
  EXPECT_EQ(EncodeResultReply(5, ToWire(*reset)), Fixture("reply_env_reset"));
  EXPECT_EQ(EncodeReply(5, *reset), Fixture("reply_env_reset"));  // the server's direct packing: same bytes

  const auto step = StepResultFromWire(ResultTree("reply_env_step"), problem);
  ASSERT_TRUE(step) << problem;
  EXPECT_EQ(*step, golden::Step());
  EXPECT_EQ(EncodeResultReply(7, ToWire(*step)), Fixture("reply_env_step"));
  EXPECT_EQ(EncodeReply(7, *step), Fixture("reply_env_step"));
  // The fixture is realistic: a map report, a text rendering, one feature per name.
  EXPECT_EQ(step->observation.report.at("timing").at("speedup"), 3.13);
  EXPECT_NE(step->observation.text.find("3.13x"), std::string::npos);
  const auto observation = ObservationFromWire(ResultTree("reply_env_step").at("observation"), problem);
  ASSERT_TRUE(observation) << problem;
  EXPECT_EQ(*observation, golden::Step().observation);

  EXPECT_EQ(ResultTree("reply_tasks_list").at("tasks").size(), 2u);
  EXPECT_EQ(ResultTree("reply_env_close"), nlohmann::json::object());
}

// Checks that `from_wire` refuses `tree` with a problem mentioning every one of `mentions`.
template <typename FromWire>
void ExpectBadResult(FromWire from_wire, const nlohmann::json& tree, const std::vector<std::string>& mentions) {
  std::string problem;
  EXPECT_FALSE(from_wire(tree, problem)) << tree.dump();
  EXPECT_FALSE(problem.empty());
  for (const std::string& m : mentions) EXPECT_NE(problem.find(m), std::string::npos) << "'" << m << "' not in: " << problem;
}

TEST(ProtocolResults, BadTreesNameTheField) {
  const nlohmann::json step = ToWire(golden::Step());
  auto without = [](nlohmann::json tree, const nlohmann::json::json_pointer& field) {
    tree[field.parent_pointer()].erase(field.back());
    return tree;
  };
  auto with = [](nlohmann::json tree, const nlohmann::json::json_pointer& field, nlohmann::json value) {
    tree[field] = std::move(value);
    return tree;
  };
  ExpectBadResult(StepResultFromWire, without(step, "/reward"_json_pointer), {"missing", "'reward'"});
  ExpectBadResult(StepResultFromWire, with(step, "/reward"_json_pointer, "1.5"), {"'reward'", "number", "string"});
  ExpectBadResult(StepResultFromWire, with(step, "/terminated"_json_pointer, 1), {"'terminated'", "boolean", "integer"});
  ExpectBadResult(StepResultFromWire, without(step, "/observation/features"_json_pointer), {"'observation.features'"});
  ExpectBadResult(StepResultFromWire, with(step, "/observation/features/2"_json_pointer, "x"),
                  {"'observation.features[2]'", "number"});
  ExpectBadResult(StepResultFromWire, with(step, "/observation/step"_json_pointer, 1.5), {"'observation.step'", "integer", "float"});
  ExpectBadResult(StepResultFromWire, with(step, "/observation/report"_json_pointer, "ok"), {"'observation.report'", "map"});
  ExpectBadResult(StepResultFromWire, with(step, "/observation"_json_pointer, nlohmann::json::array()), {"'observation'", "map", "array"});
  ExpectBadResult(StepResultFromWire, with(step, "/info"_json_pointer, nullptr), {"'info'", "map", "nil"});
  ExpectBadResult(StepResultFromWire, nlohmann::json::array(), {"result", "map"});
  ExpectBadResult(ResetResultFromWire, without(ToWire(golden::Reset()), "/observation/source"_json_pointer),
                  {"'observation.source'"});
  ExpectBadResult(EnvInfoFromWire, without(ToWire(golden::MadeEnv()), "/max_steps"_json_pointer), {"'max_steps'"});
  ExpectBadResult(EnvInfoFromWire, with(ToWire(golden::MadeEnv()), "/max_steps"_json_pointer, uint64_t{1} << 63),
                  {"'max_steps'", "range"});
  ExpectBadResult(HelloResultFromWire, with(ToWire(golden::Hello()), "/max_message_bytes"_json_pointer, -1),
                  {"'max_message_bytes'", "non-negative"});
  ExpectBadResult(HelloResultFromWire, with(ToWire(golden::Hello()), "/feature_names/1"_json_pointer, 7),
                  {"'feature_names[1]'", "string"});
  ExpectBadResult(HelloResultFromWire, without(ToWire(golden::Hello()), "/feature_names"_json_pointer), {"'feature_names'"});
}

TEST(ProtocolResults, HealthDecodesExactlyAndBadFieldsAreNamed) {
  std::string problem;
  const auto health = HealthResultFromWire(ResultTree("reply_health"), problem);
  ASSERT_TRUE(health) << problem;
  EXPECT_EQ(*health, golden::Health());
  EXPECT_EQ(health->runners.at("pallas"), 1);
  EXPECT_EQ(EncodeResultReply(17, ToWire(*health)), Fixture("reply_health"));
  // The request has no fields: one more is refused, naming it.
  const DecodedRequest extra = DecodeRequest(Pack([](auto& pk) {
    pk.pack_map(4);
    pk.pack("v"), pk.pack(kVersion), pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("health");
    pk.pack("verbose"), pk.pack(true);
  }));
  ASSERT_FALSE(extra.request);
  EXPECT_EQ(extra.error.code, ErrorCode::kBadRequest);
  EXPECT_NE(extra.error.message.find("verbose"), std::string::npos) << extra.error.message;
  EXPECT_EQ(extra.error.details.at("op"), "health");

  const nlohmann::json wire = ToWire(golden::Health());
  auto with = [&](const std::string& pointer, nlohmann::json value) {
    nlohmann::json tree = wire;
    tree[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return tree;
  };
  nlohmann::json no_status = wire;
  no_status.erase("status");
  ExpectBadResult(HealthResultFromWire, no_status, {"missing", "'status'"});
  ExpectBadResult(HealthResultFromWire, with("/runners", nlohmann::json::array()), {"'runners'", "map", "array"});
  ExpectBadResult(HealthResultFromWire, with("/runners/cpu", "two"), {"'runners.cpu'", "integer", "string"});
  ExpectBadResult(HealthResultFromWire, with("/sessions", -1), {"'sessions'", "non-negative"});
  // A newer server's extra fields and status values are read, not refused; integers are numbers.
  nlohmann::json newer = with("/status", "degraded");
  newer["uptime_s"] = 7;
  newer["added_later"] = 1;
  const auto read = HealthResultFromWire(newer, problem);
  ASSERT_TRUE(read) << problem;
  EXPECT_EQ(read->status, "degraded");
  EXPECT_EQ(read->uptime_s, 7.0);
}

TEST(ProtocolResults, UnknownFieldsAreToleratedAndNumbersMayBeIntegers) {
  // A newer server may add fields; an older client reads what it knows.
  nlohmann::json step = ToWire(golden::Step());
  step["added_later"] = {{"x", 1}};
  step["observation"]["also_new"] = "y";
  std::string problem;
  const auto decoded = StepResultFromWire(step, problem);
  ASSERT_TRUE(decoded) << problem;
  EXPECT_EQ(*decoded, golden::Step());
  // A server in another language may send 2 for 2.0.
  step["reward"] = 2;
  step["observation"]["features"] = {0, 1, 2};
  const auto integers = StepResultFromWire(step, problem);
  ASSERT_TRUE(integers) << problem;
  EXPECT_EQ(integers->reward, 2.0);
  EXPECT_EQ(integers->observation.features, (std::vector<double>{0, 1, 2}));
  // nil report: no evaluation record to show.
  step["observation"]["report"] = nullptr;
  ASSERT_TRUE(StepResultFromWire(step, problem)) << problem;
}

TEST(ProtocolResults, ResultTreesRoundTripThroughTheCodec) {
  const StepResult step = golden::Step();
  const DecodedReply reply = DecodeReply(EncodeResultReply(99, ToWire(step)));
  ASSERT_TRUE(reply.valid && reply.ok) << reply.problem;
  EXPECT_EQ(reply.id, 99u);
  std::string problem;
  const auto tree = DecodeResultTree(reply.result, problem);
  ASSERT_TRUE(tree) << problem;
  EXPECT_EQ(StepResultFromWire(*tree, problem), step) << problem;
}

TEST(ProtocolResults, BadResultBytesAreRefusedWithAProblem) {
  auto expect_refused = [](const std::string& bytes, const std::string& mention) {
    std::string problem;
    EXPECT_FALSE(DecodeResultTree(bytes, problem));
    EXPECT_NE(problem.find(mention), std::string::npos) << "'" << mention << "' not in: " << problem;
  };
  expect_refused("", "msgpack");
  expect_refused("\xc1", "msgpack");
  expect_refused(Pack([](auto& pk) { pk.pack_array(1), pk.pack(1); }), "map");
  expect_refused(Pack([](auto& pk) { pk.pack_map(0); }) + "x", "trailing");
  expect_refused(Pack([](auto& pk) { pk.pack_map(2), pk.pack("a"), pk.pack(1), pk.pack("a"), pk.pack(2); }), "twice");
  expect_refused(Pack([](auto& pk) { pk.pack_map(1), pk.pack(1), pk.pack(1); }), "keys");
  expect_refused(Pack([](auto& pk) {
                   pk.pack_map(1), pk.pack("blob");
                   pk.pack_bin(2), pk.pack_bin_body("ab", 2);
                 }),
                 "bytes");
  std::string problem;
  EXPECT_FALSE(DecodeHelloResult(Pack([](auto& pk) { pk.pack_map(1), pk.pack("protocol"), pk.pack(1); }), problem));
  EXPECT_NE(problem.find("'server'"), std::string::npos) << problem;
}

TEST(ProtocolReplies, MalformedRepliesAreInvalidNotCrashes) {
  EXPECT_FALSE(DecodeReply("").valid);
  EXPECT_FALSE(DecodeReply("\xc1").valid);
  const std::string hello = Fixture("reply_hello");
  EXPECT_FALSE(DecodeReply(hello + "x").valid);
  const DecodedReply truncated = DecodeReply(hello.substr(0, hello.size() / 2));
  EXPECT_FALSE(truncated.valid);
  EXPECT_FALSE(truncated.problem.empty());
  // An unknown error code still names the request it answers, so a client can fail that call.
  const DecodedReply unknown_code = DecodeReply(Pack([](auto& pk) {
    pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(31), pk.pack("ok"), pk.pack(false);
    pk.pack("error"), pk.pack_map(2), pk.pack("code"), pk.pack("NEW_CODE"), pk.pack("message"), pk.pack("m");
  }));
  EXPECT_FALSE(unknown_code.valid);
  EXPECT_EQ(unknown_code.id, 31u);
  EXPECT_NE(unknown_code.problem.find("NEW_CODE"), std::string::npos) << unknown_code.problem;
}

TEST(ProtocolErrors, EveryCodeHasAWireName) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c) {
    const auto code = static_cast<ErrorCode>(c);
    EXPECT_EQ(ParseErrorCode(ErrorCodeName(code)), code);
  }
  EXPECT_FALSE(ParseErrorCode("NOT_A_CODE"));
}

void ExpectError(const std::string& bytes, ErrorCode code, const std::vector<std::string>& mentions) {
  const DecodedRequest d = DecodeRequest(bytes);
  ASSERT_FALSE(d.request);
  EXPECT_EQ(ErrorCodeName(d.error.code), ErrorCodeName(code)) << d.error.message;
  for (const std::string& m : mentions) EXPECT_NE(d.error.message.find(m), std::string::npos) << "'" << m << "' not in: " << d.error.message;
}

TEST(ProtocolErrors, MalformedBytes) {
  ExpectError("", ErrorCode::kBadRequest, {"msgpack"});
  ExpectError("\xc1\xc1\xc1", ErrorCode::kBadRequest, {"msgpack"});
  const std::string hello = Fixture("request_hello");
  ExpectError(hello.substr(0, hello.size() - 2), ErrorCode::kBadRequest, {});
  ExpectError(hello + "x", ErrorCode::kBadRequest, {"trailing"});
  ExpectError(Pack([](auto& pk) { pk.pack_array(1), pk.pack(1); }), ErrorCode::kBadRequest, {"map", "array"});
  ExpectError(std::string(kMaxMessageBytes + 1, '\x90'), ErrorCode::kBadRequest, {"limit"});
}

TEST(ProtocolErrors, EnvelopeProblems) {
  ExpectError(Pack([](auto& pk) { pk.pack_map(2), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(3); }),
              ErrorCode::kBadRequest, {"op"});
  const std::string unknown = Pack([](auto& pk) {
    pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(77), pk.pack("op"), pk.pack("env.teleport");
  });
  ExpectError(unknown, ErrorCode::kUnknownOp, {"env.teleport"});
  EXPECT_EQ(DecodeRequest(unknown).id, 77u) << "the error reply must echo the id";
  ExpectError(Pack([](auto& pk) { pk.pack_map(3), pk.pack("v"), pk.pack(9), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("hello"); }),
              ErrorCode::kUnsupportedVersion, {"version 9"});
  ExpectError(Pack([](auto& pk) {
                pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("hello");
                pk.pack("extra"), pk.pack(true);
              }),
              ErrorCode::kBadRequest, {"hello", "extra"});
  ExpectError(Pack([](auto& pk) {
                pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("hello");
                pk.pack("op"), pk.pack("stats");
              }),
              ErrorCode::kBadRequest, {"twice"});
  ExpectError(Pack([](auto& pk) { pk.pack_map(1), pk.pack(5), pk.pack(1); }), ErrorCode::kBadRequest, {"key"});
}

TEST(ProtocolErrors, FieldProblemsNameTheOpAndTheField) {
  auto env_step = [](auto&& action) {
    return Pack([&](auto& pk) {
      pk.pack_map(5), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("env.step");
      pk.pack("env"), pk.pack("env-1"), pk.pack("action");
      action(pk);
    });
  };
  ExpectError(Pack([](auto& pk) { pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("env.close"); }),
              ErrorCode::kBadRequest, {"env.close", "'env'"});
  ExpectError(Pack([](auto& pk) {
                pk.pack_map(5), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("env.make");
                pk.pack("task"), pk.pack("cpu/x"), pk.pack("max_steps"), pk.pack("ten");
              }),
              ErrorCode::kBadRequest, {"env.make", "max_steps", "integer", "string"});
  ExpectError(env_step([](auto& pk) { pk.pack_map(1), pk.pack("kind"), pk.pack("teleport"); }), ErrorCode::kBadRequest,
              {"env.step.action", "teleport"});
  ExpectError(env_step([](auto& pk) { pk.pack_map(2), pk.pack("kind"), pk.pack("edit"), pk.pack("edits"), pk.pack_array(0); }),
              ErrorCode::kBadRequest, {"edits"});
  ExpectError(env_step([](auto& pk) {
                pk.pack_map(2), pk.pack("kind"), pk.pack("edit"), pk.pack("edits"), pk.pack_array(1);
                pk.pack_map(1), pk.pack("search"), pk.pack("x");
              }),
              ErrorCode::kBadRequest, {"env.step.action.edits[0]", "'replace'"});
  ExpectError(env_step([](auto& pk) { pk.pack_map(2), pk.pack("kind"), pk.pack("replace"), pk.pack("source"), pk.pack(42); }),
              ErrorCode::kBadRequest, {"source", "string"});
}

// Text on the wire is UTF-8 (docs/protocol.md): a request with invalid UTF-8 anywhere is refused
// with its id and the field named, and what a client chose (an op, a key) is never echoed raw or
// long: an error reply must be readable by a strict decoder and about a line long.
TEST(ProtocolErrors, TextIsUtf8AndAClientsTextIsNeverEchoedRawOrLong) {
  const std::string bad = "\xff\xfe\xfd";
  const std::string bad_op = Pack([&](auto& pk) {
    pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(7), pk.pack("op"), pk.pack(bad);
  });
  const DecodedRequest op = DecodeRequest(bad_op);
  ASSERT_FALSE(op.request);
  EXPECT_EQ(op.id, 7u);
  EXPECT_EQ(op.error.code, ErrorCode::kBadRequest);
  EXPECT_NE(op.error.message.find("request.op is not valid UTF-8"), std::string::npos) << op.error.message;
  EXPECT_TRUE(op.op.empty()) << "a bad op is no op a counter may be keyed by";
  EXPECT_TRUE(IsValidUtf8(op.error.message));

  const DecodedRequest task = DecodeRequest(Pack([&](auto& pk) {
    pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(8), pk.pack("op"), pk.pack("env.make");
    pk.pack("task"), pk.pack("cpu/" + bad);
  }));
  EXPECT_EQ(task.id, 8u);
  EXPECT_NE(task.error.message.find("request.task is not valid UTF-8"), std::string::npos) << task.error.message;
  const DecodedRequest meta_key = DecodeRequest(Pack([&](auto& pk) {
    pk.pack_map(6), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(9), pk.pack("op"), pk.pack("env.step");
    pk.pack("env"), pk.pack("env-1"), pk.pack("action"), pk.pack_map(1), pk.pack("kind"), pk.pack("submit");
    pk.pack("meta"), pk.pack_map(1), pk.pack(bad), pk.pack(1);
  }));
  EXPECT_NE(meta_key.error.message.find("a key in request.meta is not valid UTF-8"), std::string::npos)
      << meta_key.error.message;
  const DecodedRequest source = DecodeRequest(Pack([&](auto& pk) {
    pk.pack_map(5), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(10), pk.pack("op"), pk.pack("env.step");
    pk.pack("env"), pk.pack("env-1"), pk.pack("action"), pk.pack_map(2), pk.pack("kind"), pk.pack("replace");
    pk.pack("source"), pk.pack("int x; // " + bad);
  }));
  EXPECT_NE(source.error.message.find("request.action.source is not valid UTF-8"), std::string::npos)
      << source.error.message;

  // A 1 MB unknown op: refused by name, the name cut short; no op to count it under.
  const std::string huge_op(1 << 20, 'q');
  const DecodedRequest unknown = DecodeRequest(Pack([&](auto& pk) {
    pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(11), pk.pack("op"), pk.pack(huge_op);
  }));
  EXPECT_EQ(unknown.error.code, ErrorCode::kUnknownOp);
  EXPECT_EQ(unknown.id, 11u);
  EXPECT_LT(unknown.error.message.size(), 200u);
  EXPECT_TRUE(unknown.op.empty());
  // An unknown key of any length is named briefly too.
  const DecodedRequest key = DecodeRequest(Pack([&](auto& pk) {
    pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(12), pk.pack("op"), pk.pack("hello");
    pk.pack(huge_op), pk.pack(1);
  }));
  EXPECT_LT(key.error.message.size(), 200u) << key.error.message.substr(0, 300);
}

// Version and id rules: any integer version but this one is UNSUPPORTED_VERSION (not a range
// error), and id 0 (which marks the reply to an unreadable request) may not be used.
TEST(ProtocolErrors, VersionAndIdRules) {
  for (uint64_t v : {uint64_t{2}, uint64_t{0}, uint64_t{1} << 63}) {
    const DecodedRequest d = DecodeRequest(Pack([&](auto& pk) {
      pk.pack_map(3), pk.pack("v"), pk.pack(v), pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("hello");
    }));
    EXPECT_EQ(d.error.code, ErrorCode::kUnsupportedVersion) << v;
    EXPECT_EQ(d.id, 5u);
  }
  ExpectError(Pack([](auto& pk) { pk.pack_map(3), pk.pack("v"), pk.pack(-1), pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("hello"); }),
              ErrorCode::kUnsupportedVersion, {"version -1"});
  ExpectError(Pack([](auto& pk) { pk.pack_map(3), pk.pack("v"), pk.pack("1"), pk.pack("id"), pk.pack(5), pk.pack("op"), pk.pack("hello"); }),
              ErrorCode::kBadRequest, {"'v'", "integer"});
  ExpectError(Pack([](auto& pk) { pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(0), pk.pack("op"), pk.pack("hello"); }),
              ErrorCode::kBadRequest, {"'id' must be >= 1"});
}

// Every request whose id can be read is answered with it, even when the decoder refuses the
// message before reading it: more elements than its limits allow, a duplicated key.
TEST(ProtocolErrors, ARefusedRequestKeepsItsIdWheneverItCanBeRead) {
  const DecodedRequest long_array = DecodeRequest(Pack([](auto& pk) {
    pk.pack_map(6), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(41), pk.pack("op"), pk.pack("env.step");
    pk.pack("env"), pk.pack("e"), pk.pack("action"), pk.pack_map(1), pk.pack("kind"), pk.pack("submit");
    pk.pack("meta"), pk.pack_map(1), pk.pack("tokens"), pk.pack_array(65537);
    for (int i = 0; i < 65537; ++i) pk.pack(i);
  }));
  EXPECT_FALSE(long_array.request);
  EXPECT_EQ(long_array.id, 41u);
  EXPECT_NE(long_array.error.message.find("65,536 elements per array"), std::string::npos) << long_array.error.message;
  const DecodedRequest wide_map = DecodeRequest(Pack([](auto& pk) {
    pk.pack_map(4), pk.pack("meta"), pk.pack_map(5000);
    for (int i = 0; i < 5000; ++i) pk.pack("k" + std::to_string(i)), pk.pack(i);
    pk.pack("v"), pk.pack(1), pk.pack("op"), pk.pack("hello"), pk.pack("id"), pk.pack(42);
  }));
  EXPECT_FALSE(wide_map.request);
  EXPECT_EQ(wide_map.id, 42u) << "the id after a large map is still found";
  const DecodedRequest duplicated = DecodeRequest(Pack([](auto& pk) {
    pk.pack_map(4), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(43), pk.pack("op"), pk.pack("hello");
    pk.pack("op"), pk.pack("stats");
  }));
  EXPECT_EQ(duplicated.id, 43u);
  // Only the top level's id counts.
  EXPECT_EQ(ScanRequestId(Pack([](auto& pk) { pk.pack_map(1), pk.pack("meta"), pk.pack_map(1), pk.pack("id"), pk.pack(5); })), 0u);
  EXPECT_EQ(ScanRequestId("\xc1"), 0u);
}

TEST(ProtocolErrors, DeepNestingIsRefusedNotRecursedInto) {
  std::string bytes = Pack([](auto& pk) {
    pk.pack_map(5), pk.pack("v"), pk.pack(1), pk.pack("id"), pk.pack(1), pk.pack("op"), pk.pack("env.make");
    pk.pack("task"), pk.pack("cpu/x"), pk.pack("reward_config");
    for (int i = 0; i < 100; ++i) pk.pack_map(1), pk.pack("a");
    pk.pack(1);
  });
  ExpectError(bytes, ErrorCode::kBadRequest, {});
}

TEST(ProtocolErrors, RandomlyDamagedFixturesNeverCrashTheDecoder) {
  std::mt19937 rng(7);
  int decoded = 0, refused = 0;
  for (const auto& f : golden::Requests()) {
    const std::string original = Fixture(f.name);
    for (int i = 0; i < 300; ++i) {
      std::string bytes = original;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
      if (rng() % 5 == 0) bytes.resize(rng() % bytes.size());
      const DecodedRequest d = DecodeRequest(bytes);
      if (d.request) ++decoded;
      else {
        ++refused;
        EXPECT_FALSE(d.error.message.empty());
        EXPECT_NE(d.error.code, ErrorCode::kInternal) << d.error.message;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace kernelgym::protocol
