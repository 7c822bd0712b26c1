// The LLM roles: prompt templates, the shipped prompt files, and the reply parsers.
#include <gtest/gtest.h>

#include "policies/roles/prompt_template.h"
#include "policies/roles/reply_parsers.h"
#include "policies/roles/roles.h"

namespace kernelgym::roles {
namespace {

const std::set<std::string> kKnown = {"a", "b", "list"};

TEST(PromptTemplate, RendersVariablesAndSections) {
  std::string error;
  const auto t = PromptTemplate::Parse("a note for editors\n--- system ---\nsys {{a}}\n--- user ---\n"
                                       "x={{a}}{{#b}} b={{b}}{{/b}}{{^b}} no b{{/b}}\n",
                                       kKnown, "t.md", error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->RenderSystem({{"a", "1"}}), "sys 1");
  EXPECT_EQ(t->RenderUser({{"a", "1"}, {"b", "2"}}), "x=1 b=2");
  EXPECT_EQ(t->RenderUser({{"a", "1"}}), "x=1 no b");
  EXPECT_EQ(t->RenderUser({{"a", "1"}, {"b", ""}}), "x=1 no b");  // empty counts as unset
  EXPECT_EQ(t->used(), (std::set<std::string>{"a", "b"}));
}

TEST(PromptTemplate, ErrorsNameTheFileLineAndProblem) {
  std::string error;
  EXPECT_FALSE(PromptTemplate::Parse("--- system ---\nok\n--- user ---\nhi {{typo}}\n", kKnown, "p.md", error));
  EXPECT_NE(error.find("p.md:4: unknown variable 'typo'"), std::string::npos) << error;
  EXPECT_FALSE(PromptTemplate::Parse("--- system ---\n{{#a}} open\n--- user ---\n", kKnown, "p.md", error));
  EXPECT_NE(error.find("never closed"), std::string::npos) << error;
  EXPECT_FALSE(PromptTemplate::Parse("--- system ---\n{{#a}}{{/b}}\n--- user ---\n", kKnown, "p.md", error));
  EXPECT_NE(error.find("closes the section of a"), std::string::npos) << error;
  EXPECT_FALSE(PromptTemplate::Parse("no markers at all", kKnown, "p.md", error));
  EXPECT_NE(error.find("--- system ---"), std::string::npos) << error;
  EXPECT_FALSE(PromptTemplate::Parse("--- system ---\n{{ a b }}\n--- user ---\n", kKnown, "p.md", error));
}

// Conformance over the shipped files: every role loads, uses only known variables, and renders
// every variable it is given somewhere in its messages.
TEST(ShippedPrompts, EveryRoleLoadsAndRendersItsVariables) {
  std::string error;
  const std::optional<RoleSet> set = RoleSet::Load(DefaultPromptsDir(), error);
  ASSERT_TRUE(set) << error;
  EXPECT_NE(set->HardwareNotes("cpu").find("OpenMP"), std::string::npos);
  EXPECT_NE(set->HardwareNotes("pallas").find("VMEM"), std::string::npos);
  for (Role role : kAllRoles) {
    Variables v;
    for (const std::string& name : KnownVariables()) v[name] = "<" + name + "-value>";
    const auto messages = set->Messages(role, v);
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].role, "system");
    EXPECT_EQ(messages[1].role, "user");
    const std::string all = messages[0].content + messages[1].content;
    EXPECT_EQ(all.find("{{"), std::string::npos) << RoleName(role) << ": an unrendered tag";
    for (const char* must : {"task_id", "source"})
      EXPECT_NE(all.find(std::string("<") + must + "-value>"), std::string::npos) << RoleName(role) << " lacks " << must;
  }
}

TEST(ParsePlan, FindsTheFiveSectionsWhateverTheHeadingStyle) {
  const auto plan = ParsePlan(
      "Here is my plan.\n## Analysis\nmemory bound at 40% of peak\n**Strategy**\nfuse the passes\n"
      "3. Memory and tiling layout:\nrows of 1024 floats stay in L1\n### Hardware-specific optimizations\nAVX-512\n"
      "## Expected impact\n2x\n");
  ASSERT_TRUE(plan.plan) << plan.error;
  EXPECT_EQ(plan.plan->sections.at("Strategy"), "fuse the passes\n");
  EXPECT_EQ(plan.plan->sections.at("Memory and tiling layout"), "rows of 1024 floats stay in L1\n");
}

TEST(ParsePlan, NamesTheMissingSections) {
  const auto plan = ParsePlan("## Analysis\nslow\n## Strategy\n\n## Hardware\nSIMD\n");
  EXPECT_FALSE(plan.plan);
  EXPECT_EQ(plan.error, "the plan has no (or an empty) section: Strategy, Memory and tiling layout, Expected impact");
}

TEST(ParseKernelEdit, ReadsAWholeKernelInTheBackendsLanguage) {
  const auto cpu = ParseKernelEdit("Sure.\n```python\nprint()\n```\n```cpp\nint k;\n```\nDone.", "cpu");
  ASSERT_TRUE(cpu.action) << cpu.error;
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*cpu.action).source, "int k;\n");
  const auto pallas = ParseKernelEdit("```python\nimport jax\n```", "pallas");
  ASSERT_TRUE(pallas.action);
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*pallas.action).source, "import jax\n");
  const auto wrong = ParseKernelEdit("```python\nimport jax\n```", "cpu");
  EXPECT_FALSE(wrong.action);
  EXPECT_NE(wrong.error.find("no ```cpp block"), std::string::npos) << wrong.error;
}

TEST(ParseKernelEdit, ReadsSearchReplaceBlocksAndDiffs) {
  const auto edit = ParseKernelEdit(
      "```cpp\n<<<<<<< SEARCH\n  float s = 0;\n=======\n  double s = 0;\n>>>>>>> REPLACE\n```\n"
      "<<<<<<< SEARCH\nreturn;\n=======\n>>>>>>> REPLACE\n",
      "cpu");
  ASSERT_TRUE(edit.action) << edit.error;
  const auto& blocks = std::get<protocol::EditAction>(*edit.action).edits;
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].search, "  float s = 0;\n");
  EXPECT_EQ(blocks[0].replace, "  double s = 0;\n");
  EXPECT_EQ(blocks[1].replace, "");
  const auto patch = ParseKernelEdit("```diff\n--- a/k.cpp\n+++ b/k.cpp\n@@ -1 +1 @@\n-a\n+b\n```", "cpu");
  ASSERT_TRUE(patch.action);
  EXPECT_EQ(std::get<protocol::PatchAction>(*patch.action).diff, "--- a/k.cpp\n+++ b/k.cpp\n@@ -1 +1 @@\n-a\n+b\n");
}

TEST(ParseKernelEdit, BadRepliesAreErrorsThatSayWhy) {
  EXPECT_NE(ParseKernelEdit("I would unroll the loop.", "cpu").error.find("no code"), std::string::npos);
  EXPECT_NE(ParseKernelEdit("```cpp\nint k = ", "cpu").error.find("cut at max_tokens"), std::string::npos);
  EXPECT_NE(ParseKernelEdit("<<<<<<< SEARCH\na\n=======\nb\n", "cpu").error.find("not closed"), std::string::npos);
  EXPECT_NE(ParseKernelEdit("<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE\n", "cpu").error.find("empty SEARCH"),
            std::string::npos);
  EXPECT_NE(ParseKernelEdit("```cpp\n\n```", "cpu").error.find("empty"), std::string::npos);
}

TEST(ParseAnalysis, ReadsTheDecisionLine) {
  const auto a = ParseAnalysis("1. exp dominates (60%)\n**DECISION: Tune** - the tile size\n");
  ASSERT_TRUE(a.analysis) << a.error;
  EXPECT_EQ(a.analysis->decision, Decision::kTune);
  EXPECT_EQ(a.analysis->reason, "the tile size");
  EXPECT_EQ(a.analysis->bottlenecks, "1. exp dominates (60%)\n");
  EXPECT_EQ(ParseAnalysis("decision: stop").analysis->decision, Decision::kStop);
  EXPECT_FALSE(ParseAnalysis("it is memory bound, keep going").analysis);
}

TEST(ParseTunerProposal, WithTheTasksTemplate) {
  const auto p = ParseTunerProposal("```json\n{\"space\": {\"SIMD\": [0, 1], \"EXP\": [\"exp_poly\"]}}\n```", "cpu", false);
  ASSERT_TRUE(p.proposal) << p.error;
  EXPECT_TRUE(p.proposal->template_source.empty());
  EXPECT_EQ(p.proposal->space.at("SIMD").size(), 2u);
  EXPECT_EQ(std::get<std::string>(p.proposal->space.at("EXP")[0]), "exp_poly");
  EXPECT_FALSE(ParseTunerProposal("```json\n{\"space\": {}}\n```", "cpu", false).proposal);
  EXPECT_FALSE(ParseTunerProposal("```json\n{not json\n```", "cpu", false).proposal);
  EXPECT_FALSE(ParseTunerProposal("no json", "cpu", false).proposal);
}

TEST(ParseTunerProposal, WithItsOwnTemplateAndInstantiation) {
  const std::string reply =
      "```cpp\nconstexpr int kTile = @TILE@;\nauto f = @FN@;\n```\n```json\n{\"space\": {\"TILE\": [16, 32], \"FN\": [\"a\"]}}\n```";
  const auto p = ParseTunerProposal(reply, "cpu", true);
  ASSERT_TRUE(p.proposal) << p.error;
  EXPECT_EQ(InstantiateTemplate(p.proposal->template_source, {{"TILE", int64_t{32}}, {"FN", std::string("a")}}),
            "constexpr int kTile = 32;\nauto f = a;\n");
  const auto missing = ParseTunerProposal("```cpp\nint t = @TILE@ + @UNROLL@;\n```\n```json\n{\"space\": {\"TILE\": [1]}}\n```",
                                          "cpu", true);
  EXPECT_FALSE(missing.proposal);
  EXPECT_NE(missing.error.find("@UNROLL@"), std::string::npos) << missing.error;
}

// Found with tests/fuzz/reply_parsers_fuzzer on long lines: libstdc++'s std::regex recursed once
// per character, so a degenerate reply with a line of ~50k dashes (or '@' and ~50k capitals)
// overflowed the stack and killed the agent.
TEST(ParseAnalysis, AVeryLongLineNeitherCrashesNorHidesTheDecision) {
  const std::string dashes(200000, '-');
  EXPECT_FALSE(ParseAnalysis(dashes + "\n").analysis);
  const auto a = ParseAnalysis(dashes + "\n**DECISION: STOP** - done\n");
  ASSERT_TRUE(a.analysis) << a.error;
  EXPECT_EQ(a.analysis->decision, Decision::kStop);
  EXPECT_EQ(a.analysis->reason, "done");
}

TEST(ParseTunerProposal, AVeryLongPlaceholderRunDoesNotCrash) {
  const std::string reply =
      "```cpp\nint t = @" + std::string(200000, 'A') + "@;\n```\n```json\n{\"space\": {\"A\": [1]}}\n```";
  EXPECT_FALSE(ParseTunerProposal(reply, "cpu", true).proposal);
}

// Found by tests/fuzz/knobs_fuzzer: KnobValueFromJson wrapped an integer past int64 to a negative
// value (18446744073709551615 became -1).
TEST(ParseTunerProposal, AValuePastInt64IsRefusedNotWrapped) {
  const auto p = ParseTunerProposal("```json\n{\"space\": {\"TILE\": [18446744073709551615]}}\n```", "cpu", false);
  EXPECT_FALSE(p.proposal);
  EXPECT_NE(p.error.find("space.TILE"), std::string::npos) << p.error;
  const auto fits = ParseTunerProposal("```json\n{\"space\": {\"TILE\": [9223372036854775807]}}\n```", "cpu", false);
  ASSERT_TRUE(fits.proposal) << fits.error;
  EXPECT_EQ(std::get<int64_t>(fits.proposal->space.at("TILE")[0]), INT64_MAX);
}

}  // namespace
}  // namespace kernelgym::roles
