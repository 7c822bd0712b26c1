// The runner protocol codec: golden fixtures for every message, round trips, and every kind of bad
// input, which must become a problem naming the op and the field (never a throw or a crash).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <msgpack.hpp>
#include <random>
#include <sstream>

#include "core/result_json.h"
#include "env/protocol/messages.h"
#include "golden_runner.h"

namespace kernelgym::protocol::runner {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(KERNELGYM_SOURCE_DIR) + "/tests/fixtures/protocol/" + name + ".msgpack",
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// EvalResult has no operator==: its JSON (with samples) covers every field but the flat index.
void ExpectSameMessage(const FromRunner& got, const FromRunner& want, const std::string& name) {
  ASSERT_EQ(got.index(), want.index()) << name;
  if (const auto* done = std::get_if<JobDone>(&want)) {
    const auto& got_done = std::get<JobDone>(got);
    EXPECT_EQ(got_done.job_id, done->job_id) << name;
    EXPECT_EQ(got_done.instance, done->instance) << name;
    EXPECT_EQ(got_done.task_digest, done->task_digest) << name;
    EXPECT_EQ(ResultToJson(got_done.result, true), ResultToJson(done->result, true)) << name;
  } else if (const auto* hello = std::get_if<RunnerHello>(&want)) {
    EXPECT_EQ(std::get<RunnerHello>(got), *hello) << name;
  } else {
    EXPECT_EQ(std::get<Heartbeat>(got), std::get<Heartbeat>(want)) << name;
  }
}

TEST(RunnerProtocolGolden, EveryRunnerMessageFixtureDecodesToItsValueAndBack) {
  for (const auto& f : golden::FromRunnerMessages()) {
    const std::string bytes = Fixture(f.name);
    ASSERT_FALSE(bytes.empty()) << f.name << ".msgpack is missing: run kernelgym-runner-fixtures";
    std::string problem;
    const std::optional<FromRunner> decoded = DecodeFromRunner(bytes, problem);
    ASSERT_TRUE(decoded) << f.name << ": " << problem;
    ExpectSameMessage(*decoded, f.message, f.name);
    EXPECT_EQ(Encode(f.message), bytes) << f.name << ": the encoding changed; regenerate the fixtures on purpose";
  }
}

TEST(RunnerProtocolGolden, EveryServerMessageFixtureDecodesToItsValueAndBack) {
  for (const auto& f : golden::ToRunnerMessages()) {
    const std::string bytes = Fixture(f.name);
    ASSERT_FALSE(bytes.empty()) << f.name << ".msgpack is missing: run kernelgym-runner-fixtures";
    std::string problem;
    const std::optional<ToRunner> decoded = DecodeToRunner(bytes, problem);
    ASSERT_TRUE(decoded) << f.name << ": " << problem;
    EXPECT_EQ(*decoded, f.message) << f.name;
    EXPECT_EQ(Encode(f.message), bytes) << f.name << ": the encoding changed; regenerate the fixtures on purpose";
  }
}

TEST(RunnerProtocolGolden, TheResultFixtureCarriesEveryReport) {
  std::string problem;
  const auto decoded = DecodeFromRunner(Fixture("runner_result"), problem);
  ASSERT_TRUE(decoded) << problem;
  const EvalResult& r = std::get<JobDone>(*decoded).result;
  EXPECT_EQ(r.status, Status::kOk);
  ASSERT_TRUE(r.correctness && r.timing && r.profile);
  EXPECT_EQ(r.timing->samples.size(), 2u);
  EXPECT_EQ(r.stage_seconds.at("timing_lock_wait"), 0.125);
}

TEST(RunnerProtocol, ResultTextThatIsNotUtf8IsMadeValidOnArrival) {
  // A runner of another build may send bytes that are not UTF-8 (a candidate's stderr, an #error
  // line). The server passes result text on to clients (msgpack str, decoded strictly in Python)
  // and to the trajectory store, so the decoder makes it valid. Same-length byte surgery on the
  // golden result keeps the msgpack framing intact.
  std::string bytes = Fixture("runner_result");
  const std::string message = "correct; speedup 1.250x";
  const std::string diagnostic = "unused variable 'tmp'";
  const std::size_t at = bytes.find(message), diag_at = bytes.find(diagnostic);
  ASSERT_NE(at, std::string::npos);
  ASSERT_NE(diag_at, std::string::npos);
  bytes.replace(at, 8, "\xFF\xFE\xC0\x80\xED\xA0\x80;");  // "correct;" -> 7 bad bytes and ';'
  bytes.replace(diag_at + 7, 8, "\xE2\x82status");  // "variable" -> a cut-short sequence
  std::string problem;
  const auto decoded = DecodeFromRunner(bytes, problem);
  ASSERT_TRUE(decoded) << problem;
  const EvalResult& r = std::get<JobDone>(*decoded).result;
  const std::string fffd = "\xEF\xBF\xBD";
  std::string seven;
  for (int i = 0; i < 7; ++i) seven += fffd;
  EXPECT_EQ(r.message.substr(0, seven.size() + 1), seven + ";");
  EXPECT_EQ(r.diagnostics.at(0).message, "unused " + fffd + "status 'tmp'");
  EXPECT_NO_THROW((void)ResultToJson(r, true).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict));
}

TEST(RunnerProtocol, EveryMessageKindRoundTrips) {
  EvalResult failed;
  failed.task_id = "cpu/nope";
  failed.backend = "cpu";
  failed.status = Status::kInternalError;
  failed.message = "unknown task 'cpu/nope'";
  RunnerHello bare;
  bare.runner_id = "h:1:2";
  bare.backends = {"cpu"};
  bare.backend_info = {*FindBackendInfo("cpu")};
  const std::vector<FromRunner> from_runner{bare, Heartbeat{0}, Heartbeat{3}, JobDone{0, "a", "", failed},
                                            JobDone{UINT64_MAX, "0123456789ab", "d1g35t", golden::Result()}};
  for (const FromRunner& m : from_runner) {
    std::string problem;
    const auto back = DecodeFromRunner(Encode(m), problem);
    ASSERT_TRUE(back) << problem;
    ExpectSameMessage(*back, m, "op #" + std::to_string(m.index()));
  }
  Job no_timing;
  no_timing.job_id = 1;
  no_timing.instance = "0123456789ab";
  no_timing.backend = "cpu";
  no_timing.task = "cpu/silu_mul";
  no_timing.source = std::string(100000, 'x');
  no_timing.options.run_timing = false;
  Job minimal;
  minimal.instance = "i";
  const std::vector<ToRunner> to_runner{Welcome{}, Welcome{3}, no_timing, minimal, Ack{}, Reregister{}};
  for (const ToRunner& m : to_runner) {
    std::string problem;
    const auto back = DecodeToRunner(Encode(m), problem);
    ASSERT_TRUE(back) << problem;
    EXPECT_EQ(*back, m);
  }
}

TEST(RunnerProtocol, EachDirectionRefusesTheOthersMessages) {
  std::string problem;
  EXPECT_FALSE(DecodeFromRunner(Encode(ToRunner{Ack{}}), problem));
  EXPECT_NE(problem.find("unknown op 'ack'"), std::string::npos) << problem;
  EXPECT_FALSE(DecodeToRunner(Encode(FromRunner{Heartbeat{1}}), problem));
  EXPECT_NE(problem.find("unknown op 'heartbeat'"), std::string::npos) << problem;
}

std::string Pack(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  write(pk);
  return std::string(buffer.data(), buffer.size());
}

void ExpectFromRunnerProblem(const std::string& bytes, const std::vector<std::string>& mentions) {
  std::string problem;
  EXPECT_FALSE(DecodeFromRunner(bytes, problem));
  ASSERT_FALSE(problem.empty());
  for (const std::string& m : mentions)
    EXPECT_NE(problem.find(m), std::string::npos) << "'" << m << "' not in: " << problem;
}
void ExpectToRunnerProblem(const std::string& bytes, const std::vector<std::string>& mentions) {
  std::string problem;
  EXPECT_FALSE(DecodeToRunner(bytes, problem));
  ASSERT_FALSE(problem.empty());
  for (const std::string& m : mentions)
    EXPECT_NE(problem.find(m), std::string::npos) << "'" << m << "' not in: " << problem;
}

TEST(RunnerProtocolErrors, GarbageBytes) {
  ExpectFromRunnerProblem("", {"msgpack"});
  ExpectToRunnerProblem("\xc1\xc1", {"msgpack"});
  const std::string hello = Fixture("runner_hello");
  ExpectFromRunnerProblem(hello.substr(0, hello.size() - 3), {});
  ExpectFromRunnerProblem(hello + "x", {"trailing"});
  ExpectToRunnerProblem(Pack([](auto& pk) { pk.pack_array(2), pk.pack(1), pk.pack("job"); }), {"map", "array"});
  ExpectToRunnerProblem(std::string(kMaxMessageBytes + 1, '\x90'), {"limit"});
  ExpectFromRunnerProblem(Pack([](auto& pk) { pk.pack_map(1), pk.pack(7), pk.pack(1); }), {"key"});
}

TEST(RunnerProtocolErrors, EnvelopeProblems) {
  ExpectFromRunnerProblem(Pack([](auto& pk) { pk.pack_map(1), pk.pack("v"), pk.pack(kRunnerProtocolVersion); }),
                          {"'op'"});
  ExpectFromRunnerProblem(Pack([](auto& pk) { pk.pack_map(1), pk.pack("op"), pk.pack("heartbeat"); }),
                          {"heartbeat", "'v'"});
  ExpectFromRunnerProblem(Pack([](auto& pk) {
                            pk.pack_map(3), pk.pack("v"), pk.pack(kRunnerProtocolVersion + 1), pk.pack("op"),
                                pk.pack("heartbeat"), pk.pack("busy"), pk.pack(0);
                          }),
                          {"heartbeat", "version " + std::to_string(kRunnerProtocolVersion + 1)});
  // A runner of the previous version (no instance in its results) is told which versions differ.
  ExpectFromRunnerProblem(Pack([](auto& pk) {
                            pk.pack_map(3), pk.pack("v"), pk.pack(1), pk.pack("op"), pk.pack("heartbeat"),
                                pk.pack("busy"), pk.pack(0);
                          }),
                          {"version 1", "speaks 2"});
  ExpectToRunnerProblem(Pack([](auto& pk) {
                          pk.pack_map(2), pk.pack("v"), pk.pack(kRunnerProtocolVersion), pk.pack("op"),
                              pk.pack("teleport");
                        }),
                        {"unknown op 'teleport'"});
  ExpectToRunnerProblem(Pack([](auto& pk) {
                          pk.pack_map(3), pk.pack("v"), pk.pack(kRunnerProtocolVersion), pk.pack("op"), pk.pack("ack"),
                              pk.pack("extra"), pk.pack(1);
                        }),
                        {"ack", "unknown field 'extra'"});
  ExpectToRunnerProblem(Pack([](auto& pk) {
                          pk.pack_map(3), pk.pack("v"), pk.pack(kRunnerProtocolVersion), pk.pack("op"), pk.pack("ack"),
                              pk.pack("op"), pk.pack("ack");
                        }),
                        {"twice"});
  ExpectToRunnerProblem(
      Pack([](auto& pk) { pk.pack_map(2), pk.pack("v"), pk.pack("1"), pk.pack("op"), pk.pack("ack"); }),
      {"ack", "'v'", "integer", "string"});
}

TEST(RunnerProtocolErrors, FieldProblemsNameTheOpAndTheField) {
  auto from_runner = [](const char* op, uint32_t fields,
                        const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& rest) {
    return Pack([&](auto& pk) {
      pk.pack_map(2 + fields), pk.pack("v"), pk.pack(kRunnerProtocolVersion), pk.pack("op"), pk.pack(op);
      rest(pk);
    });
  };
  ExpectFromRunnerProblem(from_runner("heartbeat", 1, [](auto& pk) { pk.pack("busy"), pk.pack("yes"); }),
                          {"heartbeat", "'busy'", "integer", "string"});
  ExpectFromRunnerProblem(from_runner("heartbeat", 1, [](auto& pk) { pk.pack("busy"), pk.pack(-1); }),
                          {"heartbeat", "'busy'", "[0, "});
  ExpectFromRunnerProblem(from_runner("heartbeat", 0, [](auto&) {}), {"heartbeat", "'busy'"});
  ExpectFromRunnerProblem(from_runner("runner.hello", 5,
                                      [](auto& pk) {
                                        pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack("cpu");
                                        pk.pack("fingerprint"), pk.pack_map(0), pk.pack("slots"), pk.pack(1),
                                            pk.pack("pid"), pk.pack(1);
                                      }),
                          {"runner.hello", "'backends'", "array", "string"});
  ExpectFromRunnerProblem(
      from_runner("runner.hello", 5,
                  [](auto& pk) {
                    pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack_array(1), pk.pack(3);
                    pk.pack("fingerprint"), pk.pack_map(0), pk.pack("slots"), pk.pack(1), pk.pack("pid"), pk.pack(1);
                  }),
      {"runner.hello", "backends[0]", "string"});
  // The backends' descriptors, as msgpack: `name` in place of each descriptor's own.
  auto descriptors = [](auto& pk, const std::string& name) {
    BackendInfo info = *FindBackendInfo("cpu");
    info.name = name;
    const std::vector<std::uint8_t> bytes = nlohmann::json::to_msgpack(nlohmann::json::array({ToJson(info)}));
    const msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    pk.pack("backend_info"), pk.pack(h.get());
  };
  ExpectFromRunnerProblem(
      from_runner("runner.hello", 5,
                  [](auto& pk) {
                    pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack_array(1), pk.pack("cpu");
                    pk.pack("fingerprint"), pk.pack_map(0), pk.pack("slots"), pk.pack(1), pk.pack("pid"), pk.pack(1);
                  }),
      {"runner.hello", "'backend_info'"});
  ExpectFromRunnerProblem(
      from_runner("runner.hello", 6,
                  [&](auto& pk) {
                    pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack_array(1), pk.pack("cpu");
                    descriptors(pk, "pallas");
                    pk.pack("fingerprint"), pk.pack_map(0), pk.pack("slots"), pk.pack(1), pk.pack("pid"), pk.pack(1);
                  }),
      {"runner.hello", "backend_info[0]", "'pallas'", "'cpu'"});
  ExpectFromRunnerProblem(
      from_runner("runner.hello", 6,
                  [&](auto& pk) {
                    pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack_array(1), pk.pack("cpu");
                    descriptors(pk, "cpu");
                    pk.pack("fingerprint"), pk.pack_map(1), pk.pack("cores"), pk.pack(8), pk.pack("slots"), pk.pack(1);
                    pk.pack("pid"), pk.pack(1);
                  }),
      {"runner.hello.fingerprint", "'cores'", "string", "integer"});
  ExpectFromRunnerProblem(
      from_runner("runner.hello", 6,
                  [&](auto& pk) {
                    pk.pack("runner_id"), pk.pack("a"), pk.pack("backends"), pk.pack_array(1), pk.pack("cpu");
                    descriptors(pk, "cpu");
                    pk.pack("fingerprint"), pk.pack_map(0), pk.pack("slots"), pk.pack(0), pk.pack("pid"), pk.pack(1);
                  }),
      {"runner.hello", "'slots'"});
  // The result tree: a problem inside names its path.
  nlohmann::json tree = ResultToJson(golden::Result(), true);
  tree["timing"]["samples"][1]["candidate_ns"] = "fast";
  const std::vector<std::uint8_t> tree_bytes = nlohmann::json::to_msgpack(tree);
  const std::string bad_result = from_runner("result", 4, [&](auto& pk) {
    pk.pack("job_id"), pk.pack(3), pk.pack("instance"), pk.pack("i"), pk.pack("task_digest"), pk.pack("d");
    pk.pack("result");
    const msgpack::object_handle h =
        msgpack::unpack(reinterpret_cast<const char*>(tree_bytes.data()), tree_bytes.size());
    pk.pack(h.get());
  });
  ExpectFromRunnerProblem(bad_result, {"result", "'result'", "result.timing.samples[1].candidate_ns", "number"});
  ExpectFromRunnerProblem(
      from_runner("result", 2, [](auto& pk) { pk.pack("job_id"), pk.pack(-3), pk.pack("result"), pk.pack_map(0); }),
      {"result", "'job_id'", "non-negative"});
  ExpectFromRunnerProblem(from_runner("result", 4,
                                      [](auto& pk) {
                                        pk.pack("job_id"), pk.pack(3), pk.pack("instance"), pk.pack("i"),
                                            pk.pack("task_digest");
                                        pk.pack("d"), pk.pack("result"), pk.pack("ok");
                                      }),
                          {"result", "'result'", "map"});
  // A result must say which server instance's job it answers.
  ExpectFromRunnerProblem(from_runner("result", 3,
                                      [](auto& pk) {
                                        pk.pack("job_id"), pk.pack(3), pk.pack("task_digest"), pk.pack("d"),
                                            pk.pack("result");
                                        pk.pack_map(0);
                                      }),
                          {"result", "'instance'"});

  auto to_runner = [](const char* op, uint32_t fields,
                      const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& rest) {
    return Pack([&](auto& pk) {
      pk.pack_map(2 + fields), pk.pack("v"), pk.pack(kRunnerProtocolVersion), pk.pack("op"), pk.pack(op);
      rest(pk);
    });
  };
  ExpectToRunnerProblem(to_runner("welcome", 1, [](auto& pk) { pk.pack("heartbeat_interval_s"), pk.pack(0.0); }),
                        {"welcome", "heartbeat_interval_s", "> 0"});
  ExpectToRunnerProblem(
      to_runner("welcome", 1, [](auto& pk) { pk.pack("heartbeat_interval_s"), pk.pack(std::nan("")); }),
      {"welcome", "finite"});
  auto job = [&](const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& options, bool with_source = true,
                 bool with_digest = true, const char* instance = "0123456789ab") {
    return to_runner("job", 4 + with_source + with_digest + (instance != nullptr), [&](auto& pk) {
      pk.pack("job_id"), pk.pack(1);
      if (instance) pk.pack("instance"), pk.pack(instance);
      pk.pack("backend"), pk.pack("cpu"), pk.pack("task"), pk.pack("cpu/x");
      if (with_digest) pk.pack("task_digest"), pk.pack("00ff");
      if (with_source) pk.pack("source"), pk.pack("int x;");
      pk.pack("options");
      options(pk);
    });
  };
  auto options = [](int64_t first_seed, const char* budget_key) {
    return [=](auto& pk) {
      pk.pack_map(6), pk.pack("seeds"), pk.pack_array(1), pk.pack(first_seed), pk.pack("timing_seed"), pk.pack(0);
      pk.pack("run_timing"), pk.pack(true), pk.pack(budget_key), pk.pack(0.5), pk.pack("min_rounds"), pk.pack(20);
      pk.pack("target_relative_ci"), pk.pack(0.03);
    };
  };
  std::string problem;
  ASSERT_TRUE(DecodeToRunner(job(options(5, "timing_budget_s")), problem)) << problem << " (the well-formed job)";
  ExpectToRunnerProblem(job(options(5, "timing_budget_s"), false), {"job", "'source'"});
  ExpectToRunnerProblem(job(options(5, "timing_budget_s"), true, false), {"job", "'task_digest'"});
  ExpectToRunnerProblem(job(options(5, "timing_budget_s"), true, true, nullptr), {"job", "'instance'"});
  ExpectToRunnerProblem(job(options(5, "timing_budget_s"), true, true, ""), {"job", "'instance'", "empty"});
  ExpectToRunnerProblem(job(options(-5, "timing_budget_s")), {"job.options", "seeds[0]", "non-negative"});
  ExpectToRunnerProblem(job(options(5, "budget")), {"job.options", "timing_budget_s"});
  ExpectToRunnerProblem(job([](auto& pk) { pk.pack(true); }), {"job.options", "map", "boolean"});
}

TEST(RunnerProtocolErrors, RandomlyDamagedFixturesNeverCrashTheDecoders) {
  std::mt19937 rng(11);
  int refused = 0;
  std::vector<std::string> fixtures;
  for (const auto& f : golden::FromRunnerMessages()) fixtures.push_back(Fixture(f.name));
  for (const auto& f : golden::ToRunnerMessages()) fixtures.push_back(Fixture(f.name));
  for (const std::string& original : fixtures) {
    ASSERT_FALSE(original.empty());
    for (int i = 0; i < 300; ++i) {
      std::string bytes = original;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
      if (rng() % 5 == 0) bytes.resize(rng() % bytes.size());
      std::string from_problem, to_problem;
      const bool from_ok = DecodeFromRunner(bytes, from_problem).has_value();
      const bool to_ok = DecodeToRunner(bytes, to_problem).has_value();
      EXPECT_FALSE(from_ok && to_ok) << "one message cannot be valid in both directions";
      if (!from_ok && !to_ok) {
        ++refused;
        EXPECT_FALSE(from_problem.empty());
        EXPECT_EQ(from_problem.find("decoding failed"), std::string::npos) << from_problem;
        EXPECT_EQ(to_problem.find("decoding failed"), std::string::npos) << to_problem;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace kernelgym::protocol::runner
