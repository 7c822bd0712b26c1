// The one reply reader (policies/roles/model_reply.h) and what the parsers make of its answer:
// thinking separated however it is delivered, decisions and code from the final answer only, tool
// calls and fence tags read, the kernel picked by the task's entry point, not by position.
#include <gtest/gtest.h>

#include "policies/roles/model_reply.h"
#include "policies/roles/reply_parsers.h"

namespace kernelgym::roles {
namespace {

llm::ChatOutcome Outcome(std::string content, std::string reasoning = "", std::vector<llm::ChatToolCall> calls = {}) {
  llm::ChatOutcome outcome;
  outcome.status = llm::ChatStatus::kOk;
  outcome.content = std::move(content);
  outcome.reasoning = std::move(reasoning);
  outcome.tool_calls = std::move(calls);
  return outcome;
}

const char* kKernel = "void kernel(const float* x, float* y, int64_t n) {\n  for (int64_t i = 0; i < n; ++i) y[i] = x[i];\n}\n";

TEST(ReadModelReply, InlineThinkingAndAReasoningFieldReadTheSame) {
  const ModelReply inline_think = ReadModelReply(Outcome("<think>\nDraft: DECISION: STOP\n</think>\n\nDECISION: CONTINUE - tile it"));
  const ModelReply field = ReadModelReply(Outcome("DECISION: CONTINUE - tile it", "Draft: DECISION: STOP"));
  EXPECT_EQ(inline_think.answer, "DECISION: CONTINUE - tile it");
  EXPECT_EQ(inline_think.reasoning, "Draft: DECISION: STOP");
  EXPECT_EQ(field.answer, inline_think.answer);
  EXPECT_EQ(field.reasoning, inline_think.reasoning);
  EXPECT_FALSE(inline_think.thinking_unfinished);
}

TEST(ReadModelReply, TagVariantsAClosingTagAloneAndUnfinishedThinking) {
  EXPECT_EQ(ReadModelReply(Outcome("<THINKING>x</THINKING>answer")).answer, "answer");
  EXPECT_EQ(ReadModelReply(Outcome("<reasoning>x</reasoning>answer")).answer, "answer");
  // Templates that open the thinking in the prompt: the reply starts inside it.
  const ModelReply opened_by_template = ReadModelReply(Outcome("thinking here\n</think>\nthe answer"));
  EXPECT_EQ(opened_by_template.reasoning, "thinking here");
  EXPECT_EQ(opened_by_template.answer, "the answer");
  // Cut while thinking: no answer at all, and it says so.
  const ModelReply cut = ReadModelReply(Outcome("<think>still going ```cpp\nvoid kernel("));
  EXPECT_EQ(cut.answer, "");
  EXPECT_TRUE(cut.thinking_unfinished);
  EXPECT_NE(cut.reasoning.find("still going"), std::string::npos);
}

TEST(ReadModelReply, ADecisionDraftedInThinkingDoesNotWin) {
  const ModelReply reply = ReadModelReply(Outcome("<think>DECISION: STOP - looks done</think>\nMemory bound.\nDECISION: CONTINUE - fuse the loads"));
  const AnalysisOrError a = ParseAnalysis(reply.answer);
  ASSERT_TRUE(a.analysis) << a.error;
  EXPECT_EQ(a.analysis->decision, Decision::kContinue);
  EXPECT_EQ(a.analysis->reason, "fuse the loads");
}

TEST(ReadModelReply, ADiffDraftedInThinkingIsNotApplied) {
  const std::string content = std::string("<think>\nMaybe:\n```diff\n@@ -1 +1 @@\n-a\n+b\n```\nNo, rewrite it.\n</think>\n```cpp\n") +
                              kKernel + "```\n";
  const ActionOrError parsed = ParseKernelEdit(ReadModelReply(Outcome(content)).answer, "cpu", "kernel");
  ASSERT_TRUE(parsed.action) << parsed.error;
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*parsed.action).source, kKernel);
}

TEST(ReadModelReply, ToolCallsBecomeCodeTheParsersRead) {
  const ModelReply reply = ReadModelReply(
      Outcome("", "", {{"write_kernel", nlohmann::json{{"source", kKernel}, {"note", "a copy"}}.dump()}}));
  const ActionOrError parsed = ParseKernelEdit(reply.answer, "cpu", "kernel");
  ASSERT_TRUE(parsed.action) << parsed.error << "\n" << reply.answer;
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*parsed.action).source, kKernel);
  EXPECT_NE(reply.answer.find("note: a copy"), std::string::npos) << reply.answer;
  // A diff argument is a ```diff block; arguments that are not JSON are kept verbatim.
  const ModelReply diff = ReadModelReply(Outcome("", "", {{"apply_patch", R"({"patch": "@@ -1 +1 @@\n-a\n+b\n"})"}}));
  const ActionOrError patch = ParseKernelEdit(diff.answer, "cpu");
  ASSERT_TRUE(patch.action) << patch.error;
  EXPECT_EQ(std::get<protocol::PatchAction>(*patch.action).diff, "@@ -1 +1 @@\n-a\n+b\n");
  EXPECT_NE(ReadModelReply(Outcome("", "", {{"f", "{not json"}})).answer.find("{not json"), std::string::npos);
}

TEST(ParseKernelEdit, TheKernelIsTheBlockThatDefinesTheEntryPointNotTheLast) {
  const std::string reply = std::string("Here is the kernel:\n```cpp\n") + kKernel +
                            "```\nCall it like this:\n```cpp\nstd::vector<float> y(n);\nkernel(x.data(), y.data(), n);\n```\n";
  const ActionOrError parsed = ParseKernelEdit(reply, "cpu", "kernel");
  ASSERT_TRUE(parsed.action) << parsed.error;
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*parsed.action).source, kKernel);
  // Without an entry point, position decides (the old behaviour, kept for callers that know none).
  EXPECT_NE(std::get<protocol::ReplaceAction>(*ParseKernelEdit(reply, "cpu").action).source, kKernel);
  // A Python entry point.
  const ActionOrError pallas = ParseKernelEdit(
      "```python\ndef kernel(x):\n    return x\n```\n```python\nprint(kernel(jnp.ones(3)))\n```", "pallas", "kernel");
  ASSERT_TRUE(pallas.action) << pallas.error;
  EXPECT_EQ(std::get<protocol::ReplaceAction>(*pallas.action).source, "def kernel(x):\n    return x\n");
}

TEST(ParseKernelEdit, DefinitionsDeclarationsAndCalls) {
  EXPECT_TRUE(DefinesFunction("extern \"C\" void kernel(const float* x,\n  float* y) noexcept\n{\n}", "kernel"));
  EXPECT_TRUE(DefinesFunction("def kernel(a, b):\n  pass", "kernel"));
  EXPECT_FALSE(DefinesFunction("void kernel(const float* x, float* y);", "kernel"));
  EXPECT_FALSE(DefinesFunction("kernel(x, y);\nif (ok) { }", "kernel"));
  EXPECT_FALSE(DefinesFunction("void my_kernel(int a) {}", "kernel"));
  EXPECT_EQ(EntryPoint("void kernel(const float* x, int64_t n)"), "kernel");
  EXPECT_EQ(EntryPoint("no parenthesis"), "");
}

TEST(FencedBlocks, InfoStringsWithFileNamesAndAttributes) {
  const auto blocks = FencedBlocks("```cpp:kernel.cpp\na\n```\n```C++ title=k.cpp\nb\n```\n```cpp {.numberLines}\nc\n```\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].language, "cpp");
  EXPECT_EQ(blocks[1].language, "c++");
  EXPECT_EQ(blocks[2].language, "cpp");
  const ActionOrError parsed = ParseKernelEdit(std::string("```cpp:kernel.cpp\n") + kKernel + "```", "cpu", "kernel");
  ASSERT_TRUE(parsed.action) << parsed.error;
}

}  // namespace
}  // namespace kernelgym::roles
