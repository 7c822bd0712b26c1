// Source-changing actions: edit blocks (exactly-once matching) and unified diffs (hunk headers
// recounted from their bodies, then GNU patch).
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

// What models write: the body is right, the numbers are not. Without the recount GNU patch
// calls the counts malformed.
TEST(ApplyPatch, AModelsDiffWithWrongNumbersAppliesWhereItsContextIsUnique) {
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -10,7 +10,9 @@\n"
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];\n"
      " }\n";
  const EditOutcome out = ApplyPatch(kSource, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_EQ(*out.source,
            "#include <cstdint>\n"
            "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
            "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];\n"
            "}\n");
}

const std::string kTwoLoops =
    "#include <cstdint>\n"
    "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
    "  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
    "  for (int64_t i = 0; i < n; ++i) y[i] += 1;\n"
    "}\n";

TEST(ApplyPatch, EveryHunkIsRecountedAndPlacedInOrder) {
  // The first hunk adds a line, so the second one's new start moves; both headers are wrong and
  // the second hunk has more context before its change than after it.
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -1,1 +1,1 @@\n"
      " #include <cstdint>\n"
      "+#include <cmath>\n"
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "@@ -40,2 +40,2 @@\n"
      "   for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] += 1;\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(y[i]);\n";
  const EditOutcome out = ApplyPatch(kTwoLoops, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_EQ(*out.source,
            "#include <cstdint>\n"
            "#include <cmath>\n"
            "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
            "  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
            "  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(y[i]);\n"
            "}\n");
}

TEST(ApplyPatch, AHunkWhoseContextMatchesTwoPlacesIsRefusedAndNamed) {
  const std::string source = kTwoLoops + kTwoLoops.substr(kTwoLoops.find('\n') + 1);  // the kernel twice
  const std::string diff =
      "@@ -1,1 +1,1 @@\n"
      " #include <cstdint>\n"
      "+#include <cmath>\n"
      "@@ -3,9 +4,9 @@\n"
      "   for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] += 1;\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] += 2;\n"
      " }\n";
  const EditOutcome out = ApplyPatch(source, diff);
  EXPECT_FALSE(out.source);
  EXPECT_NE(out.error.find("hunk 2"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("matches 2 places"), std::string::npos) << out.error;
}

TEST(ApplyPatch, ANearMatchIsStillRefusedNotFuzzed) {
  // "int64_t j" where the source has "int64_t i": one character off, and the counts are wrong too.
  const std::string diff =
      "@@ -2,4 +2,4 @@\n"
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "-  for (int64_t j = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = 0;\n"
      " }\n";
  const EditOutcome out = ApplyPatch(kSource, diff);
  EXPECT_FALSE(out.source);
  EXPECT_NE(out.error.find("hunk 1"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("is not in the current source"), std::string::npos) << out.error;
}

TEST(ApplyPatch, ADiffWithRightNumbersAppliesWhereItSays) {
  // The hunk's old text is in both functions, so the recount cannot place it; the header can.
  const std::string source =
      "void a(float* y) {\n"
      "  y[0] = 0;\n"
      "}\n"
      "void b(float* y) {\n"
      "  y[0] = 0;\n"
      "}\n";
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -5,2 +5,2 @@\n"
      "-  y[0] = 0;\n"
      "+  y[0] = 1;\n"
      " }\n";
  const EditOutcome out = ApplyPatch(source, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_EQ(*out.source,
            "void a(float* y) {\n"
            "  y[0] = 0;\n"
            "}\n"
            "void b(float* y) {\n"
            "  y[0] = 1;\n"
            "}\n");
}

TEST(ApplyPatch, AnEmptyContextLineMayLackItsLeadingSpace) {
  const std::string source =
      "#include <cstdint>\n"
      "\n"
      "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "}\n";
  const std::string diff =
      "@@ -1,3 +1,3 @@\n"
      " #include <cstdint>\n"
      "\n"  // the empty line between the include and the kernel, written without its space
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = -x[i];\n"
      " }\n";
  const EditOutcome out = ApplyPatch(source, diff);
  ASSERT_TRUE(out.source) << out.error;
  EXPECT_EQ(*out.source,
            "#include <cstdint>\n"
            "\n"
            "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
            "  for (int64_t i = 0; i < n; ++i) y[i] = -x[i];\n"
            "}\n");
}

TEST(RecountHunks, RewritesHeadersFromTheBodyAndThePlaceItMatches) {
  const std::string diff =
      "--- a/kernel.cpp\n"
      "+++ b/kernel.cpp\n"
      "@@ -9,9 +9,9 @@ kernel\n"
      " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
      "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
      "+  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];\n"
      "+  y[0] = 0;\n"
      " }\n"
      "```\n";
  std::string why;
  const std::optional<std::string> recounted = RecountHunks(kSource, diff, why);
  ASSERT_TRUE(recounted) << why;
  EXPECT_EQ(*recounted,
            "--- a/kernel.cpp\n"
            "+++ b/kernel.cpp\n"
            "@@ -2,3 +2,4 @@ kernel\n"
            " extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
            "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
            "+  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];\n"
            "+  y[0] = 0;\n"
            " }\n"
            "```\n");
}

TEST(RecountHunks, DeclinesWhatItCannotPlaceForSure) {
  std::string why;
  // Out of order: the second hunk is above the first in the source.
  EXPECT_FALSE(RecountHunks(kTwoLoops,
                            "@@ -1 +1 @@\n"
                            "-  for (int64_t i = 0; i < n; ++i) y[i] += 1;\n"
                            "+  y[0] = 1;\n"
                            "@@ -2 +2 @@\n"
                            "-#include <cstdint>\n"
                            "+#include <cmath>\n",
                            why));
  EXPECT_NE(why.find("hunk 2"), std::string::npos) << why;
  EXPECT_NE(why.find("overlaps hunk 1"), std::string::npos) << why;
  // A context line that lost its leading space would cut the hunk short and drop the change after it.
  EXPECT_FALSE(RecountHunks(kSource,
                            "@@ -1 +1 @@\n"
                            " #include <cstdint>\n"
                            "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
                            "-  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n"
                            "+  for (int64_t i = 0; i < n; ++i) y[i] = 0;\n",
                            why));
  EXPECT_NE(why.find("line 3 of the diff"), std::string::npos) << why;
  // Nothing to recount.
  EXPECT_FALSE(RecountHunks(kSource, "no hunks here\n", why));
  EXPECT_TRUE(why.empty()) << why;
}

// Two files' sections, which GNU patch with -o would write one after the other into the source.
TEST(ApplyPatch, ADiffOfTwoFilesIsRefused) {
  const std::string diff =
      "--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -1 +1 @@\n-a\n+A\n"
      "--- a/other.cpp\n+++ b/other.cpp\n@@ -1 +1 @@\n-a\n+B\n";
  const EditOutcome out = ApplyPatch("a\nb\nc\nd\n", diff);
  EXPECT_FALSE(out.source) << *out.source;
  EXPECT_NE(out.error.find("changes 2 files"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace kernelgym
