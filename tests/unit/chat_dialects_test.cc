// The chat client against the ways real servers answer and refuse (each imitated by the scripted
// endpoint, policies/llm/scripted_server.h): reasoning fields, content as a list of parts or null,
// tool calls, replies without usage, the 400s hosted reasoning models and small-context servers
// give, a base URL without /v1, a missing key; and the budgets that hold inside a call.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "policies/llm/chat_client.h"
#include "policies/llm/scripted_server.h"
#include "tests/unit/scripted_chat_test.h"

namespace kernelgym::llm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<ChatMessage> kHello = {{"system", "You write kernels."}, {"user", "hello there"}};

class ChatDialectsTest : public ScriptedChatTest {
 protected:
  ChatOptions Options() const {
    ChatOptions options = ScriptedChatTest::Options();
    options.max_tokens = 500;
    return options;
  }
};

TEST_F(ChatDialectsTest, ReasoningFieldsAreKeptApartFromTheContent) {
  Serve({{"rules",
          {{{"match", "vllm"}, {"replies", {{{"content", "answer A"}, {"reasoning_content", "thinking A"}}}}},
           {{"match", "openrouter"}, {"replies", {{{"content", "answer B"}, {"reasoning", "thinking B"}}}}}}}});
  ChatClient client(Options());
  const ChatOutcome a = client.Complete({{"user", "vllm"}});
  ASSERT_TRUE(a.ok()) << a.error;
  EXPECT_EQ(a.content, "answer A");
  EXPECT_EQ(a.reasoning, "thinking A");
  const ChatOutcome b = client.Complete({{"user", "openrouter"}});
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_EQ(b.content, "answer B");
  EXPECT_EQ(b.reasoning, "thinking B");
}

TEST_F(ChatDialectsTest, ContentAsAListOfPartsIsJoined) {
  Serve({{"default", {{"content_parts", {"```cpp\nvoid kernel() {}\n", "```\n"}}}}});
  ChatClient client(Options());
  const ChatOutcome outcome = client.Complete(kHello);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "```cpp\nvoid kernel() {}\n```\n");
}

TEST_F(ChatDialectsTest, ToolCallsWithNullContentAreAReply) {
  json call = {{"name", "write_kernel"}, {"arguments", {{"source", "void kernel() {}\n"}}}};
  json reply = {{"content", nullptr}, {"tool_calls", json::array({call})}};
  Serve({{"default", reply}});
  ChatClient client(Options());
  const ChatOutcome outcome = client.Complete(kHello);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "");
  ASSERT_EQ(outcome.tool_calls.size(), 1u);
  EXPECT_EQ(outcome.tool_calls[0].name, "write_kernel");
  EXPECT_EQ(json::parse(outcome.tool_calls[0].arguments), (json{{"source", "void kernel() {}\n"}}));
}

TEST_F(ChatDialectsTest, ThinkingCutAtTheLimitIsATruncationWhoseTokensCount) {
  // A reasoning parser on the server: all the budget went to thinking, content is null.
  Serve({{"default",
          {{"content", nullptr},
           {"reasoning_content", "Let me think about tiling..."},
           {"finish_reason", "length"},
           {"usage", {{"prompt_tokens", 40}, {"completion_tokens", 500}}}}}});
  ChatClient client(Options());
  const ChatOutcome outcome = client.Complete(kHello);
  EXPECT_EQ(outcome.status, ChatStatus::kTruncated) << outcome.error;
  EXPECT_EQ(outcome.content, "");
  EXPECT_EQ(outcome.reasoning, "Let me think about tiling...");
  EXPECT_EQ(outcome.max_tokens, 500);
  EXPECT_EQ(client.totals().completion_tokens, 500);
  EXPECT_EQ(client.totals().malformed, 0);
}

TEST_F(ChatDialectsTest, UsageOfAMalformedReplyIsStillCounted) {
  json body = {{"usage", {{"prompt_tokens", 9}, {"completion_tokens", 4}}}, {"choices", json::array()}};
  Serve({{"default", {{"body", body}}}});
  ChatClient client(Options());
  const ChatOutcome outcome = client.Complete(kHello);
  EXPECT_EQ(outcome.status, ChatStatus::kMalformed);
  EXPECT_EQ(client.totals().prompt_tokens, 9);
  EXPECT_EQ(client.totals().completion_tokens, 4);
}

TEST_F(ChatDialectsTest, AMissingUsageIsEstimatedAndSaysSo) {
  const std::string content(400, 'x');
  Serve({{"default", {{"content", content}, {"usage", nullptr}}}});
  ChatClient client(Options());
  const ChatOutcome outcome = client.Complete(kHello);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_TRUE(outcome.usage.estimated);
  EXPECT_EQ(outcome.usage.completion_tokens, 100);  // 400 characters at 4 a token
  EXPECT_GT(outcome.usage.prompt_tokens, 0);
  const ChatTotals totals = client.totals();
  EXPECT_EQ(totals.estimated_usage_calls, 1);
  EXPECT_EQ(totals.completion_tokens, 100);
}

TEST_F(ChatDialectsTest, AReasoningModelThatRefusesMaxTokensIsServedWithMaxCompletionTokens) {
  ScriptedServer& server =
      Serve({{"endpoint",
              {{"reject_fields",
                {{"max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                "'max_completion_tokens' instead."},
                 {"temperature", "Unsupported value: 'temperature' does not support 0.2 with this model."}}}}},
             {"default", {{"content", "fine"}}}});
  ChatOptions options = Options();
  options.temperature = 0.2;
  {
    ChatClient client(options);
    const ChatOutcome refused = client.Complete(kHello);
    EXPECT_EQ(refused.status, ChatStatus::kHttpError);
    EXPECT_EQ(refused.http_status, 400);
    EXPECT_EQ(refused.attempts, 1);
    EXPECT_TRUE(refused.fatal());
    // The server's own words, not a body excerpt to decode.
    EXPECT_NE(refused.error.find("Use 'max_completion_tokens' instead"), std::string::npos) << refused.error;
    EXPECT_EQ(client.totals().failures.at("http_400"), 1);
  }
  options.token_limit_field = "max_completion_tokens";
  options.send_temperature = false;
  ChatClient client(options);
  const ChatOutcome outcome = client.Complete(kHello);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  const json body = server.requests().back().body;
  EXPECT_EQ(body.at("max_completion_tokens"), 500);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("temperature"));
}

TEST_F(ChatDialectsTest, ExtraBodyFieldsAreSent) {
  ScriptedServer& server = Serve({{"default", {{"content", "fine"}}}});
  ChatOptions options = Options();
  options.extra_body = {{"chat_template_kwargs", {{"enable_thinking", false}}}, {"top_p", 0.9}, {"model", "other"}};
  ChatClient client(options);
  ASSERT_TRUE(client.Complete(kHello).ok());
  const json body = server.requests().back().body;
  EXPECT_EQ(body.at("chat_template_kwargs").at("enable_thinking"), false);
  EXPECT_EQ(body.at("top_p"), 0.9);
  EXPECT_EQ(body.at("model"), options.model);  // the client's own fields win over extra ones
}

TEST_F(ChatDialectsTest, AContextWindowShrinksTheCompletionLimitSoTheRequestFits) {
  // A 4k-context server: prompt + max_tokens above 4096 is refused.
  ScriptedServer& server = Serve({{"endpoint", {{"context_window", 4096}}}, {"default", {{"content", "fine"}}}});
  const std::vector<ChatMessage> long_prompt = {{"user", std::string(8000, 'k')}};  // ~2000 tokens
  ChatOptions options = Options();
  options.max_tokens = 4096;
  {
    ChatClient client(options);
    const ChatOutcome refused = client.Complete(long_prompt);
    EXPECT_EQ(refused.http_status, 400);
    EXPECT_TRUE(refused.fatal());
    EXPECT_NE(refused.error.find("maximum context length is 4096 tokens"), std::string::npos) << refused.error;
    EXPECT_NE(refused.error.find("--context-window"), std::string::npos) << refused.error;  // what to do about it
  }
  {
    // The endpoint's GET /models gives its context length (vLLM's max_model_len): the first
    // contact takes it, and the long prompt then fits without --context-window.
    ChatClient client(options);
    EXPECT_EQ(client.CheckEndpoint(), "");
    EXPECT_EQ(client.options().context_window, 4096);
    const ChatOutcome fitted = client.Complete(long_prompt);
    ASSERT_TRUE(fitted.ok()) << fitted.error;
    EXPECT_LT(fitted.max_tokens, 4096 - 2000);
  }
  options.context_window = 4096;
  ChatClient client(options);
  const ChatOutcome outcome = client.Complete(long_prompt);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_LT(outcome.max_tokens, 4096 - 2000);
  EXPECT_GT(outcome.max_tokens, 1000);
  EXPECT_EQ(server.requests().back().body.at("max_tokens"), outcome.max_tokens);
  // A prompt that leaves no room is not sent at all.
  const ChatOutcome no_room = client.Complete({{"user", std::string(17000, 'k')}});
  EXPECT_EQ(no_room.status, ChatStatus::kBudget);
  EXPECT_EQ(no_room.attempts, 0);
  EXPECT_NE(no_room.error.find("context_window=4096"), std::string::npos) << no_room.error;
}

TEST_F(ChatDialectsTest, ABaseUrlWithoutV1AndAMissingKeyAreFatalWithAHint) {
  Serve({{"endpoint", {{"api_key", "sk-right"}}}, {"default", {{"content", "fine"}}}});
  ChatOptions options = Options();
  std::string base = options.base_url;
  options.base_url = base.substr(0, base.size() - 3);  // without "/v1"
  {
    ChatClient client(options);
    const ChatOutcome outcome = client.Complete(kHello);
    EXPECT_EQ(outcome.http_status, 404);
    EXPECT_TRUE(outcome.fatal());
    EXPECT_EQ(outcome.attempts, 1);
    EXPECT_NE(outcome.error.find("/v1"), std::string::npos) << outcome.error;
    EXPECT_NE(client.CheckEndpoint().find("HTTP 404"), std::string::npos);
  }
  options.base_url = base;
  ChatClient client(options);
  const ChatOutcome outcome = client.Complete(kHello);
  EXPECT_EQ(outcome.http_status, 401);
  EXPECT_TRUE(outcome.fatal());
  EXPECT_NE(outcome.error.find("Incorrect API key"), std::string::npos) << outcome.error;
  EXPECT_NE(outcome.error.find("$KERNELGYM_CHAT_TEST_KEY"), std::string::npos) << outcome.error;
  const std::string check = client.CheckEndpoint();
  EXPECT_NE(check.find("HTTP 401"), std::string::npos) << check;

  setenv("KERNELGYM_CHAT_TEST_KEY", "sk-right", 1);
  EXPECT_EQ(client.CheckEndpoint(), "");
  EXPECT_TRUE(client.Complete(kHello).ok());
}

TEST_F(ChatDialectsTest, CheckEndpointFailsFastWhenNothingListens) {
  Serve({{"default", {{"content", "fine"}}}});
  ChatOptions options = Options();
  const std::string base = options.base_url;
  server_->Stop();
  ChatClient client(options);
  const auto start = Clock::now();
  const std::string why = client.CheckEndpoint(5);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5);
  EXPECT_NE(why.find(base + "/models"), std::string::npos) << why;
}

TEST_F(ChatDialectsTest, TheDeadlineHoldsInsideACall) {
  // A reply that takes 10 s, a request timeout of 10 s and a deadline 2 s away: the call ends at
  // the deadline, and is not retried past it. (Margins are wide: the machine may be busy.)
  Serve({{"default", {{"content", "slow"}, {"delay_s", 10}}}});
  ChatClient client(Options());
  const auto start = Clock::now();
  client.SetDeadline(start + std::chrono::seconds(2));
  const ChatOutcome outcome = client.Complete(kHello);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(outcome.status, ChatStatus::kTimeout) << outcome.error;
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_GE(seconds, 1.9);
  EXPECT_LT(seconds, 5);
  EXPECT_NE(outcome.error.find("time budget"), std::string::npos) << outcome.error;
  // Past the deadline nothing is sent.
  const ChatOutcome after = client.Complete(kHello);
  EXPECT_EQ(after.status, ChatStatus::kBudget) << after.error;
  EXPECT_EQ(after.attempts, 0);
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(ChatDialectsTest, TheTokenBudgetCutsTheLimitThenRefuses) {
  ScriptedServer& server =
      Serve({{"default", {{"content", "ok"}, {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 400}}}}}});
  ChatOptions options = Options();
  options.max_tokens = 2000;
  options.budget.max_tokens = 1000;
  ChatClient client(options);
  const ChatOutcome first = client.Complete(kHello);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_LT(first.max_tokens, 1000);  // the whole budget, less the prompt's estimate
  EXPECT_GT(first.max_tokens, 900);
  const ChatOutcome second = client.Complete(kHello);  // 500 used: the limit is what is left
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_LT(second.max_tokens, 500);
  EXPECT_GT(second.max_tokens, 400);
  EXPECT_EQ(server.requests().back().body.at("max_tokens"), second.max_tokens);
  const ChatOutcome third = client.Complete(kHello);  // 1000 used: nothing is sent
  EXPECT_EQ(third.status, ChatStatus::kBudget);
  EXPECT_NE(third.error.find("token budget"), std::string::npos) << third.error;
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(client.totals().refused, 1);
  EXPECT_EQ(client.totals().failed, 0);
}

TEST_F(ChatDialectsTest, TheCostBudgetIsPricedAndHolds) {
  Serve({{"default", {{"content", "ok"}, {"usage", {{"prompt_tokens", 1000}, {"completion_tokens", 1000}}}}}});
  ChatOptions options = Options();
  options.budget.price_in_per_million = 1000;   // 0.001 a prompt token
  options.budget.price_out_per_million = 2000;  // 0.002 a completion token
  options.budget.max_cost = 4;
  ChatClient client(options);
  ASSERT_TRUE(client.Complete(kHello).ok());
  EXPECT_DOUBLE_EQ(client.totals().cost, 3);
  const ChatOutcome second = client.Complete(kHello);  // 1 left: at most ~500 completion tokens
  EXPECT_EQ(second.status, ChatStatus::kOk);
  EXPECT_LE(second.max_tokens, 500);
  const ChatOutcome third = client.Complete(kHello);
  EXPECT_EQ(third.status, ChatStatus::kBudget) << third.error;
  EXPECT_NE(third.error.find("cost budget"), std::string::npos) << third.error;
}

}  // namespace
}  // namespace kernelgym::llm
