// Source-changing actions: edit blocks (exactly-once matching) and unified diffs (GNU patch).
#include <gtest/gtest.h>

#include "env/episode/source_edits.h"

namespace kernelgym {
namespace {

const std::string kSource =
    "#include <cstdint>\n"
    "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
    "  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
    "}\n";

TEST(ApplyEdits, BlocksApplyInOrder) {
  const EditOutcome out = ApplyEdits(kSource, {{"y[i] = x[i];", "y[i] = 2 * x[i];"}, {"2 * x[i]", "x[i] + x[i]"}});
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_NE(out.source->find("y[i] = x[i] + x[i];"), std::string::npos);
}

TEST(ApplyEdits, ABlockMustMatchExactlyOnceAndIsNamed) {
  EditOutcome missing = ApplyEdits(kSource, {{"y[i] = x[i];", "y[i] = 0;"}, {"no such text", "x"}});
  EXPECT_FALSE(missing.source);
  EXPECT_NE(missing.error.find("edit block 1"), std::string::npos) << missing.error;
  EXPECT_NE(missing.error.find("not found"), std::string::npos) << missing.error;
  EditOutcome unique = ApplyEdits(kSource, {{"x[i]", "z"}});  // once in the source
  EXPECT_TRUE(unique.source) << unique.error;
  EditOutcome twice = ApplyEdits(kSource, {{"i]", "j]"}});     // in y[i] and x[i]
  EXPECT_FALSE(twice.source);
  EXPECT_NE(twice.error.find("matches 2 places"), std::string::npos) << twice.error;
  EXPECT_FALSE(ApplyEdits(kSource, {{"", "x"}}).source);
  EXPECT_FALSE(ApplyEdits(kSource, {}).source);
}

TEST(ApplyPatch, AppliesAUnifiedDiff) {
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -2,3 +2,3 @@\n"
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];\n"
      " }\n";
  const EditOutcome out = ApplyPatch(kSource, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_NE(out.source->find("x[i] * x[i]"), std::string::npos);
  EXPECT_EQ(out.source->find("y[i] = x[i];"), std::string::npos);
}

TEST(ApplyPatch, ADiffThatDoesNotFitIsRefusedNotFuzzed) {
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -3,1 +3,1 @@\n"
      "-  for (int i = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int i = 0; i < n; ++i) y[i] = 0;\n";
  const EditOutcome out = ApplyPatch(kSource, diff);
  EXPECT_FALSE(out.source);
  EXPECT_NE(out.error.find("does not apply"), std::string::npos) << out.error;
  EXPECT_FALSE(ApplyPatch(kSource, "just some text\n").source);
}

TEST(ApplyPatch, HeaderPathsCannotRedirectTheWrite) {
  const std::string diff =
      "--- /etc/hostname\n"
      "+++ /tmp/kernelgym-should-not-exist\n"
      "@@ -1,1 +1,1 @@\n"
      "-#include <cstdint>\n"
      "+#include <cstdint>  // patched\n";
  const EditOutcome out = ApplyPatch(kSource, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_NE(out.source->find("// patched"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists("/tmp/kernelgym-should-not-exist"));
}

}  // namespace
}  // namespace kernelgym
