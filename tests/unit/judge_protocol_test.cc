// The runner <-> pallas judge protocol (tpu_runner/pallas/judge_protocol.h): the golden messages
// the Python side also decodes (tpu_runner/pallas/tests/data/protocol, test_protocol.py) decode
// here to their types and encode back to the same JSON; what is not a message of this version is
// refused with an error naming it. And the verdict on an estimate (pallas_verdict.h): the one
// place that decides whether it is paid.
#include "tpu_runner/pallas/judge_protocol.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tpu_runner/pallas/pallas_verdict.h"

namespace kernelgym {
namespace {

using nlohmann::json;

std::filesystem::path GoldenDir() { return std::filesystem::path(KERNELGYM_SOURCE_DIR) / "tpu_runner/pallas/tests/data/protocol"; }

json Golden(const std::string& name) {
  std::ifstream in(GoldenDir() / (name + ".json"));
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

json With(json message, const std::string& key, json value) {
  message[key] = std::move(value);
  return message;
}

std::string Refusal(const json& message) {
  std::string error;
  EXPECT_FALSE(judge::Decode(message, error).has_value()) << message.dump();
  return error;
}

TEST(JudgeProtocol, EveryGoldenMessageDecodesToItsKindAndEncodesBackTheSame) {
  std::set<std::string> kinds;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GoldenDir())) {
    ++files;
    const json golden = Golden(entry.path().stem().string());
    std::string error;
    const std::optional<judge::Message> message = judge::Decode(golden.dump(), error);
    ASSERT_TRUE(message.has_value()) << entry.path() << ": " << error;
    EXPECT_EQ(judge::KindOf(*message), golden.at("kind").get<std::string>());
    EXPECT_EQ(judge::ToJson(*message), golden) << entry.path();
    kinds.insert(judge::KindOf(*message));
  }
  EXPECT_GE(files, 10);
  EXPECT_EQ(kinds, (std::set<std::string>{"ready", "job", "trace_job", "specs", "reference", "artifact", "traced",
                                          "progress", "compile_key", "compile_facts", "result", "fatal", "fork_job",
                                          "job_ended"}));
}

TEST(JudgeProtocol, TheGoldenFieldsArriveTyped) {
  std::string error;
  const auto reference = judge::Decode(Golden("reference"), error);
  ASSERT_TRUE(reference) << error;
  const auto& r = std::get<judge::Reference>(*reference);
  ASSERT_EQ(r.trials.size(), 1u);
  EXPECT_EQ(r.trials[0].outputs[0].shape, (std::vector<int64_t>{256, 1024}));
  EXPECT_DOUBLE_EQ(r.trials[0].outputs[0].atol, 1e-5);
  ASSERT_TRUE(r.estimate.has_value());
  EXPECT_TRUE(r.estimate->trusted);
  const auto job = judge::Decode(Golden("job"), error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(std::get<judge::JudgeJob>(*job).seeds.back(), (int64_t{1} << 52) - 1);
  const auto failure = judge::Decode(Golden("result_failure"), error);
  ASSERT_TRUE(failure) << error;
  EXPECT_FALSE(std::get<judge::Result>(*failure).estimate.has_value());
  EXPECT_EQ(std::get<judge::Result>(*failure).diagnostics.at(0).line, 3);
}

// The fork servers' words (forkserver.py) are the protocol's too: a job's end arrives typed, and
// the untyped form the servers spoke before, or a field of another type, is refused.
TEST(JudgeProtocol, TheForkServersMessagesAreTyped) {
  std::string error;
  const auto ended = judge::Decode(Golden("job_ended"), error);
  ASSERT_TRUE(ended) << error;
  EXPECT_EQ(std::get<judge::JobEnded>(*ended), (judge::JobEnded{.job = 3, .exit_code = -1, .signal = 9, .clean = true}));
  const auto fork = judge::Decode(Golden("fork_job"), error);
  ASSERT_TRUE(fork) << error;
  EXPECT_EQ(std::get<judge::ForkJob>(*fork).descriptors, 3);
  EXPECT_EQ(judge::Encode(judge::ForkJob{3}), Golden("fork_job").dump());
  EXPECT_NE(Refusal(json{{"event", "exited"}, {"job", 3}, {"exit_code", 0}, {"clean", true}}).find("version missing"),
            std::string::npos);
  EXPECT_NE(Refusal(With(Golden("job_ended"), "clean", "yes")).find("job_ended.clean: must be a boolean"),
            std::string::npos);
  json without_signal = Golden("job_ended");
  without_signal.erase("signal");
  EXPECT_NE(Refusal(without_signal).find("missing field 'signal'"), std::string::npos);
}

TEST(JudgeProtocol, RefusesAnotherVersionAnUnknownKindAndUnknownOrMissingFields) {
  json ready = Golden("ready");
  EXPECT_NE(Refusal(With(ready, "v", 2)).find("version 2"), std::string::npos);
  EXPECT_NE(Refusal(With(ready, "kind", "estimates")).find("unknown message kind 'estimates'"), std::string::npos);
  EXPECT_NE(Refusal(With(ready, "estimated_speedup", 3.0)).find("unknown field 'estimated_speedup'"),
            std::string::npos);
  json missing = ready;
  missing.erase("on_tpu");
  EXPECT_NE(Refusal(missing).find("missing field 'on_tpu'"), std::string::npos);
  EXPECT_NE(Refusal(With(ready, "on_tpu", 1)).find("ready.on_tpu: must be a boolean"), std::string::npos);
  EXPECT_NE(Refusal(With(ready, "fork_server_job", 1.5)).find("must be an integer"), std::string::npos);
  // Deep inside: the path names the field.
  json reference = Golden("reference");
  reference["trials"][0]["outputs"][0]["atol"] = "1e-5";
  EXPECT_NE(Refusal(reference).find("reference.trials[0].outputs[0].atol: must be a number"), std::string::npos);
  // The judge reports the estimator's figures; what a speedup is worth is not its to say.
  json result = Golden("result_ok");
  result["estimate"]["speedup"] = 9.0;
  EXPECT_NE(Refusal(result).find("result.estimate: unknown field 'speedup'"), std::string::npos);
  std::string error;
  EXPECT_FALSE(judge::Decode(std::string("{\"v\": 1, \"kind\": \"ready\""), error));
  EXPECT_NE(error.find("not JSON"), std::string::npos);
  EXPECT_FALSE(judge::Decode(json::array(), error));
}

// ---- the estimate's verdict (pallas_verdict.h) ----

judge::CandidateEstimate Candidate(double us, bool trusted, std::vector<std::string> reasons = {}) {
  judge::CandidateEstimate c;
  c.estimated_us = us;
  c.trusted = trusted;
  c.reasons = std::move(reasons);
  c.method = "llo_schedule";
  return c;
}

judge::ReferenceEstimate ReferenceOf(double us, bool trusted) {
  judge::ReferenceEstimate r;
  r.estimated_us = us;
  r.trusted = trusted;
  return r;
}

// What the pallas backend hands the verdict: a result with no timing of the target's clock.
EvalResult Correct(SpeedEstimate estimate) {
  EvalResult r;
  r.timing_representative = false;
  r.timing_clock = "none";
  r.estimate = std::move(estimate);
  return r;
}

TEST(EstimateVerdict, BothFiguresTrustedOffATpuIsPaidAsAnEstimate) {
  EvalResult r = Correct(EstimateOf(Candidate(20, true), ReferenceOf(50, true)));
  DecideVerdict(r, /*on_tpu=*/false);
  ASSERT_TRUE(r.estimate);
  EXPECT_TRUE(r.estimate->trusted);
  EXPECT_DOUBLE_EQ(r.estimate->speedup, 2.5);
  EXPECT_EQ(r.timing_clock, kTpuEstimateClock);
  const RewardableSpeedup paid = RewardableSpeedupOf(r);
  EXPECT_EQ(paid.kind, SpeedupKind::kEstimated);
  EXPECT_DOUBLE_EQ(paid.value, 2.5);
  EXPECT_NE(r.message.find("not a measurement"), std::string::npos) << r.message;
}

TEST(EstimateVerdict, AnythingLessIsNotPaidAndSaysWhy) {
  struct Case {
    const char* what;
    judge::CandidateEstimate candidate;
    std::optional<judge::ReferenceEstimate> reference;
    bool on_tpu;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"candidate untrusted", Candidate(20, false, {"a loop with a dynamic trip count"}), ReferenceOf(50, true), false,
       "dynamic trip count"},
      {"candidate untrusted, no reason given", Candidate(20, false), ReferenceOf(50, true), false, "does not trust"},
      {"reference untrusted", Candidate(20, true), ReferenceOf(50, false), false, "reference's estimate is not trusted"},
      {"no reference", Candidate(20, true), std::nullopt, false, "no estimate for the reference"},
      {"no candidate figure", Candidate(0, true), ReferenceOf(50, true), false, "no estimate for the candidate"},
      {"on a TPU host", Candidate(20, true), ReferenceOf(50, true), true, "own clock ran"},
  };
  for (const Case& c : cases) {
    EvalResult r = Correct(EstimateOf(c.candidate, c.reference));
    DecideVerdict(r, c.on_tpu);
    ASSERT_TRUE(r.estimate) << c.what;
    EXPECT_FALSE(r.estimate->trusted) << c.what;
    EXPECT_NE(RewardableSpeedupOf(r).kind, SpeedupKind::kEstimated) << c.what;
    bool named = false;
    for (const std::string& why : r.estimate->reasons) named = named || why.find(c.reason) != std::string::npos;
    EXPECT_TRUE(named) << c.what << ": expected '" << c.reason << "' among the reasons";
  }
}

TEST(EstimateVerdict, AnIncorrectResultIsNeverPaidWhateverItsEstimate) {
  EvalResult r = Correct(EstimateOf(Candidate(20, true), ReferenceOf(50, true)));
  DecideVerdict(r, false);
  r.status = Status::kIncorrect;
  EXPECT_EQ(RewardableSpeedupOf(r).kind, SpeedupKind::kNone);
}

}  // namespace
}  // namespace kernelgym
