// Status and stage names: the strings every result JSON and every policy keys on.
#include "core/result.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace kernelgym {
namespace {

const std::vector<Status> kAllStatuses{
    Status::kOk,      Status::kRejected,         Status::kCompileError, Status::kIncorrect,     Status::kCrashed,
    Status::kTimeout, Status::kSandboxViolation, Status::kImplausible,  Status::kInternalError,
};

const std::vector<Stage> kAllStages{Stage::kStaticCheck, Stage::kCompile, Stage::kSymbolCheck, Stage::kCorrectness,
                                    Stage::kTiming,      Stage::kProfile, Stage::kDone};

TEST(StatusName, NamesAreExactlyTheDocumentedOnes) {
  std::vector<std::string> names;
  for (Status s : kAllStatuses) names.emplace_back(StatusName(s));
  const std::vector<std::string> documented{"ok",      "rejected",          "compile_error", "incorrect",     "crashed",
                                            "timeout", "sandbox_violation", "implausible",   "internal_error"};
  EXPECT_EQ(names, documented);
}

// docs/results.md documents each status as a table row "| `name` | ...": the same set, in order.
TEST(StatusName, MatchesTheStatusTableInDocsResultsMd) {
  std::ifstream in(std::string(KERNELGYM_SOURCE_DIR) + "/docs/results.md");
  if (!in) GTEST_SKIP() << "docs/results.md not found under " << KERNELGYM_SOURCE_DIR;
  std::vector<std::string> documented;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find('`', 3);
    if (end != std::string::npos) documented.push_back(line.substr(3, end - 3));
  }
  std::vector<std::string> names;
  for (Status s : kAllStatuses) names.emplace_back(StatusName(s));
  EXPECT_EQ(documented, names);
}

TEST(StatusName, EveryStatusRoundTrips) {
  for (Status s : kAllStatuses) {
    const std::string name(StatusName(s));
    auto parsed = ParseStatus(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, s) << name;
  }
}

TEST(StatusName, NamesAreUniqueAndNotPlaceholder) {
  std::set<std::string> seen;
  for (Status s : kAllStatuses) {
    const std::string name(StatusName(s));
    EXPECT_NE(name, "?");
    EXPECT_TRUE(seen.insert(name).second) << "duplicate status name " << name;
  }
}

TEST(ParseStatus, RejectsUnknownAndWrongCase) {
  EXPECT_FALSE(ParseStatus("").has_value());
  EXPECT_FALSE(ParseStatus("OK").has_value());
  EXPECT_FALSE(ParseStatus("Ok").has_value());
  EXPECT_FALSE(ParseStatus("compile-error").has_value());
  EXPECT_FALSE(ParseStatus("ok ").has_value());
  EXPECT_FALSE(ParseStatus("success").has_value());
  EXPECT_FALSE(ParseStatus("?").has_value());
}

TEST(StageName, EveryStageRoundTripsAndIsUnique) {
  std::set<std::string> seen;
  for (Stage s : kAllStages) {
    const std::string name(StageName(s));
    EXPECT_NE(name, "?");
    EXPECT_TRUE(seen.insert(name).second) << name;
    auto parsed = ParseStage(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseStage("").has_value());
  EXPECT_FALSE(ParseStage("Compile").has_value());
  EXPECT_FALSE(ParseStage("ok").has_value());
}

TEST(StageName, StageNames) {
  EXPECT_EQ(StageName(Stage::kStaticCheck), "static_check");
  EXPECT_EQ(StageName(Stage::kCompile), "compile");
  EXPECT_EQ(StageName(Stage::kSymbolCheck), "symbol_check");
  EXPECT_EQ(StageName(Stage::kCorrectness), "correctness");
  EXPECT_EQ(StageName(Stage::kTiming), "timing");
  EXPECT_EQ(StageName(Stage::kProfile), "profile");
  EXPECT_EQ(StageName(Stage::kDone), "done");
}

TEST(OutputCheck, PassedMeansNoMismatches) {
  OutputCheck check;
  EXPECT_TRUE(check.passed());
  check.mismatches = 1;
  EXPECT_FALSE(check.passed());
}

TEST(EvalResult, DefaultsToInternalErrorAtStaticCheck) {
  // A result nobody filled in must not read as a success.
  EvalResult r;
  EXPECT_EQ(r.status, Status::kInternalError);
  EXPECT_EQ(r.stage, Stage::kStaticCheck);
}

}  // namespace
}  // namespace kernelgym
