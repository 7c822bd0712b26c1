// The client protocol codec: golden fixtures (the same files the Python client decodes) and
// every kind of bad input, which must become an error naming the op and the field.
#include <gtest/gtest.h>

#include <fstream>
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

TEST(ProtocolGolden, ReplyFixturesMatchAndDecode) {
  for (const auto& f : golden::Replies()) EXPECT_EQ(Fixture(f.name), f.bytes) << f.name;
  const DecodedReply error = DecodeReply(Fixture("reply_error_unknown_env"));
  ASSERT_TRUE(error.valid) << error.problem;
  EXPECT_FALSE(error.ok);
  EXPECT_EQ(error.id, 21u);
  EXPECT_EQ(error.error.code, ErrorCode::kUnknownEnv);
  EXPECT_EQ(error.error.details.at("env"), "env-9");
  const DecodedReply hello = DecodeReply(Fixture("reply_hello"));
  ASSERT_TRUE(hello.valid && hello.ok) << hello.problem;
  const auto result = DecodeHelloResult(hello.result);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->protocol, kVersion);
  EXPECT_EQ(result->backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(result->action_kinds.size(), 6u);
}

TEST(ProtocolErrors, EveryCodeHasAWireName) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c) {
    const auto code = static_cast<ErrorCode>(c);
    EXPECT_EQ(ParseErrorCode(ErrorCodeName(code)), code);
  }
  EXPECT_FALSE(ParseErrorCode("NOT_A_CODE"));
}

// A request map built field by field, for the malformed cases.
std::string Pack(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  write(pk);
  return std::string(buffer.data(), buffer.size());
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
