// The chat-completions client against the scripted endpoint, both in this process on
// http://127.0.0.1:<any port>. Every failure the client turns into a value (HTTP errors, retries,
// Retry-After, timeouts, malformed and truncated replies, refused connections) is scripted here,
// as are the concurrency limit and the script's own rules and validation.
#include "policies/llm/chat_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "policies/llm/scripted_server.h"
#include "tests/unit/scripted_chat_test.h"

namespace kernelgym::llm {
namespace {

using nlohmann::json;

const std::vector<ChatMessage> kHello = {{"system", "You write kernels."}, {"user", "hello there"}};

std::vector<ChatMessage> Ask(const std::string& text) { return {{"user", text}}; }

using ChatClientTest = ScriptedChatTest;

TEST_F(ChatClientTest, NormalReply) {
  ScriptedServer& server = Serve({{"rules",
                                   {{{"replies",
                                      {{{"content", "__global__ void k() {}"},
                                        {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 7}}}}}}}}}});
  ChatOptions options = Options();
  options.base_url += "/";  // a trailing '/' is stripped, not doubled
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  EXPECT_EQ(outcome.status, ChatStatus::kOk) << outcome.error;
  EXPECT_TRUE(outcome.ok());
  EXPECT_EQ(outcome.content, "__global__ void k() {}");
  EXPECT_EQ(outcome.finish_reason, "stop");
  EXPECT_EQ(outcome.http_status, 200);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_EQ(outcome.usage.prompt_tokens, 11);
  EXPECT_EQ(outcome.usage.completion_tokens, 7);
  EXPECT_TRUE(outcome.error.empty());

  const std::vector<ScriptedRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const json& body = requests[0].body;
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["messages"], json::parse(R"([{"role":"system","content":"You write kernels."},
                                               {"role":"user","content":"hello there"}])"));
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.5);
  EXPECT_EQ(body["max_tokens"], 123);
  EXPECT_EQ(json::parse(ChatRequestBody(options, kHello)), body);

  const ChatTotals totals = client.totals();
  EXPECT_EQ(totals.calls, 1);
  EXPECT_EQ(totals.ok, 1);
  EXPECT_EQ(totals.failed, 0);
  EXPECT_EQ(totals.attempts, 1);
  EXPECT_EQ(totals.retries, 0);
  EXPECT_EQ(totals.prompt_tokens, 11);
  EXPECT_EQ(totals.completion_tokens, 7);
  EXPECT_EQ(totals.max_in_flight, 1);
}

TEST_F(ChatClientTest, DefaultUsageCountsWords) {
  Serve({{"default", {{"content", "one two three"}}}});
  ChatClient client(Options());
  ChatOutcome outcome = client.Complete(kHello);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.usage.prompt_tokens, 5);  // "You write kernels." + "hello there"
  EXPECT_EQ(outcome.usage.completion_tokens, 3);
}

TEST_F(ChatClientTest, AuthorizationComesFromTheEnvironment) {
  ScriptedServer& server = Serve({{"default", {{"content", "ok"}}}});
  ChatClient client(Options());

  setenv("KERNELGYM_CHAT_TEST_KEY", "sk-test-123", 1);
  ASSERT_TRUE(client.Complete(kHello).ok());
  setenv("KERNELGYM_CHAT_TEST_KEY", "", 1);
  ASSERT_TRUE(client.Complete(kHello).ok());
  unsetenv("KERNELGYM_CHAT_TEST_KEY");
  ASSERT_TRUE(client.Complete(kHello).ok());

  const std::vector<ScriptedRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].authorization, "Bearer sk-test-123");
  EXPECT_EQ(requests[1].authorization, "");
  EXPECT_EQ(requests[2].authorization, "");
}

TEST_F(ChatClientTest, RetryAfterIsHonoredOverBackoff) {
  ScriptedServer& server =
      Serve({{"default", {{{"status", 429}, {"headers", {{"Retry-After", "1"}}}}, {{"content", "after the wait"}}}}});
  ChatOptions options = Options();
  options.backoff_max_s = 60;  // the jitter alone would wait at most backoff_initial_s (1 ms)
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "after the wait");
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_GE(outcome.seconds, 0.9);
  const std::vector<ScriptedRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].status, 429);
  EXPECT_GE(requests[1].arrived_s - requests[0].answered_s, 0.9);
  EXPECT_EQ(client.totals().retries, 1);
}

TEST_F(ChatClientTest, RetryAfterIsCappedAtBackoffMax) {
  Serve({{"default", {{{"status", 503}, {"headers", {{"Retry-After", "30"}}}}, {{"content", "soon enough"}}}}});
  ChatOptions options = Options();
  options.backoff_max_s = 0.05;
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_LT(outcome.seconds, 5);
}

TEST_F(ChatClientTest, ExponentialBackoffIsCappedAtBackoffMax) {
  Serve({{"default", {{{"status", 502}}, {{"status", 502}}, {{"status", 502}}, {{"content", "up"}}}}});
  ChatOptions options = Options();
  options.retries = 3;
  options.backoff_initial_s = 100;  // uncapped, the waits could reach 100, 200 and 400 s
  options.backoff_max_s = 0.05;
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.attempts, 4);
  EXPECT_LT(outcome.seconds, 5);
}

TEST_F(ChatClientTest, ServerErrorThenSuccess) {
  Serve({{"default", {{{"status", 500}}, {{"content", "recovered"}}}}});
  ChatClient client(Options());

  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "recovered");
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_EQ(outcome.http_status, 200);
}

TEST_F(ChatClientTest, ServerErrorForeverFailsAfterTheRetries) {
  ScriptedServer& server = Serve({{"default", {{"status", 500}, {"body", "overloaded, try later"}}}});
  ChatClient client(Options());  // retries = 2

  ChatOutcome outcome = client.Complete(kHello);

  EXPECT_EQ(outcome.status, ChatStatus::kHttpError);
  EXPECT_EQ(outcome.attempts, 3);
  EXPECT_EQ(outcome.http_status, 500);
  EXPECT_NE(outcome.error.find("POST " + server.base_url() + "/chat/completions"), std::string::npos) << outcome.error;
  EXPECT_NE(outcome.error.find("HTTP 500 after 3 attempts"), std::string::npos) << outcome.error;
  EXPECT_NE(outcome.error.find("overloaded, try later"), std::string::npos) << outcome.error;
  EXPECT_EQ(server.requests().size(), 3u);
  const ChatTotals totals = client.totals();
  EXPECT_EQ(totals.failed, 1);
  EXPECT_EQ(totals.attempts, 3);
  EXPECT_EQ(totals.retries, 2);
}

TEST_F(ChatClientTest, ErrorQuotesOnlyTheStartOfALongBody) {
  Serve({{"default", {{"status", 400}, {"body", std::string(300, 'a') + std::string(5000, 'b')}}}});
  ChatClient client(Options());
  ChatOutcome outcome = client.Complete(kHello);
  EXPECT_NE(outcome.error.find(std::string(300, 'a')), std::string::npos);
  EXPECT_EQ(outcome.error.find('b'), std::string::npos) << outcome.error;
}

TEST_F(ChatClientTest, ClientErrorIsNotRetried) {
  ScriptedServer& server = Serve({{"default", {{"status", 400}}}});
  ChatClient client(Options());

  ChatOutcome outcome = client.Complete(kHello);

  EXPECT_EQ(outcome.status, ChatStatus::kHttpError);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_EQ(outcome.http_status, 400);
  EXPECT_NE(outcome.error.find("scripted HTTP 400"), std::string::npos) << outcome.error;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(ChatClientTest, Timeout) {
  Serve({{"default", {{"delay_s", 2}, {"content", "too late"}}}});
  ChatOptions options = Options();
  options.request_timeout_s = 0.3;
  options.retries = 0;
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  EXPECT_EQ(outcome.status, ChatStatus::kTimeout);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_EQ(outcome.http_status, 0);
  EXPECT_LT(outcome.seconds, 1.5);
  EXPECT_NE(outcome.error.find("request_timeout_s=0.3"), std::string::npos) << outcome.error;
  EXPECT_EQ(client.totals().failed, 1);
}

TEST_F(ChatClientTest, TimeoutThenSuccess) {
  Serve({{"default", {{{"delay_s", 2}, {"content", "too late"}}, {{"content", "on time"}}}}});
  ChatOptions options = Options();
  options.request_timeout_s = 0.3;
  options.retries = 1;
  ChatClient client(options);

  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "on time");
  EXPECT_EQ(outcome.attempts, 2);
}

TEST_F(ChatClientTest, TruncatedReplyKeepsThePartialText) {
  Serve({{"default", {{"content", "__global__ void k("}, {"finish_reason", "length"}}}});
  ChatClient client(Options());

  ChatOutcome outcome = client.Complete(kHello);

  EXPECT_EQ(outcome.status, ChatStatus::kTruncated);
  EXPECT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.content, "__global__ void k(");
  EXPECT_EQ(outcome.finish_reason, "length");
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_NE(outcome.error.find("max_tokens=123"), std::string::npos) << outcome.error;
  const ChatTotals totals = client.totals();
  EXPECT_EQ(totals.truncated, 1);
  EXPECT_EQ(totals.failed, 0);
}

TEST_F(ChatClientTest, MalformedBodies) {
  Serve({{"rules",
          {{{"match", "not json"}, {"replies", {{"body", "<html>gateway</html>"}}}},
           {{"match", "no choices"}, {"replies", {{"body", {{"id", "x"}, {"object", "chat.completion"}}}}}},
           {{"match", "null content"},
            {"replies",
             {{"body",
               {{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", nullptr}}}}}}}}}}}}}});
  ChatClient client(Options());

  for (const char* question : {"not json", "no choices", "null content"}) {
    ChatOutcome outcome = client.Complete(Ask(question));
    EXPECT_EQ(outcome.status, ChatStatus::kMalformed) << question;
    EXPECT_EQ(outcome.attempts, 1) << question;
    EXPECT_EQ(outcome.http_status, 200) << question;
    EXPECT_NE(outcome.error.find("HTTP 200"), std::string::npos) << outcome.error;
  }
  const ChatTotals totals = client.totals();
  EXPECT_EQ(totals.malformed, 3);
  EXPECT_EQ(totals.failed, 3);
  EXPECT_EQ(totals.ok, 0);
}

TEST_F(ChatClientTest, ConnectionRefused) {
  // A socket bound but not listening: the port is ours, and connecting to it is refused.
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);

  ChatOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  options.model = "m";
  options.retries = 1;
  options.backoff_initial_s = 0.001;
  ChatClient client(options);
  ChatOutcome outcome = client.Complete(kHello);
  close(sock);

  EXPECT_EQ(outcome.status, ChatStatus::kTransportError);
  EXPECT_EQ(outcome.attempts, 2);  // a refused connection is retried
  EXPECT_EQ(outcome.http_status, 0);
  EXPECT_NE(outcome.error.find("127.0.0.1"), std::string::npos) << outcome.error;
  EXPECT_NE(outcome.error.find(std::to_string(port)), std::string::npos) << outcome.error;
}

// Six threads call at once against replies that stay in flight for a while; returns the server's
// and the client's peak concurrency.
std::pair<int, int> PeakConcurrency(int max_concurrency) {
  ScriptedServer server(json{{"default", {{"delay_s", 0.4}, {"content", "held"}}}});
  server.Start();
  ChatOptions options;
  options.base_url = server.base_url();
  options.model = "m";
  options.max_concurrency = max_concurrency;
  ChatClient client(options);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] { ok += client.Complete(kHello).ok() ? 1 : 0; });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok, 6);
  return {server.max_in_flight(), client.totals().max_in_flight};
}

TEST_F(ChatClientTest, ConcurrencyIsBoundedByMaxConcurrency) {
  const auto [server_peak, client_peak] = PeakConcurrency(2);
  EXPECT_EQ(server_peak, 2);
  EXPECT_EQ(client_peak, 2);
  // The same load without the limit goes wider: the limit, not the server, bounded it above.
  const auto [free_server_peak, free_client_peak] = PeakConcurrency(6);
  EXPECT_GT(free_server_peak, 2);
  EXPECT_GT(free_client_peak, 2);
}

TEST_F(ChatClientTest, FirstMatchingRuleAnswersAndItsLastReplyRepeats) {
  Serve({{"rules",
          {{{"match", "alpha"}, {"replies", {{{"content", "a1"}}, {{"content", "a2"}}}}},
           {{"match", "alphabet"}, {"replies", {{"content", "never: the rule above matches first"}}}},
           {{"match", "beta"}, {"replies", {{"content", "b"}}}}}},
         {"default", {{{"content", "d1"}}, {{"content", "d2"}}}}});
  ChatClient client(Options());
  auto answer = [&](const std::vector<ChatMessage>& messages) { return client.Complete(messages).content; };

  EXPECT_EQ(answer(Ask("alphabet soup")), "a1");
  EXPECT_EQ(answer(Ask("alpha")), "a2");
  EXPECT_EQ(answer(Ask("alpha again")), "a2");
  // A match in any message counts, not only the last one.
  EXPECT_EQ(answer({{"system", "you are beta"}, {"user", "hi"}}), "b");
  EXPECT_EQ(answer(Ask("gamma")), "d1");
  EXPECT_EQ(answer(Ask("gamma")), "d2");
  EXPECT_EQ(answer(Ask("delta")), "d2");
}

TEST_F(ChatClientTest, NoMatchAndNoDefaultIsAServerError) {
  Serve({{"rules", {{{"match", "alpha"}, {"replies", {{"content", "a"}}}}}}});
  ChatOptions options = Options();
  options.retries = 0;
  ChatClient client(options);
  ChatOutcome outcome = client.Complete(Ask("beta"));
  EXPECT_EQ(outcome.status, ChatStatus::kHttpError);
  EXPECT_EQ(outcome.http_status, 500);
  EXPECT_NE(outcome.error.find("no scripted reply"), std::string::npos) << outcome.error;
}

TEST_F(ChatClientTest, ContentFileIsReadRelativeToTheScript) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "chat_client_test_content_file";
  std::filesystem::create_directories(dir / "replies");
  std::ofstream(dir / "replies" / "kernel.cu") << "__global__ void from_file() {}\n";
  std::ofstream(dir / "script.json") << R"({"default": {"content_file": "replies/kernel.cu"}})";

  server_ = ScriptedServer::FromFile(dir / "script.json");
  server_->Start();
  ChatClient client(Options());
  ChatOutcome outcome = client.Complete(kHello);

  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(outcome.content, "__global__ void from_file() {}\n");
  std::filesystem::remove_all(dir);
}

TEST(ScriptedServerTest, ScriptValidationNamesTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), "script: must be a map"},
      {{{"rules", {{{"replies", {{"content", "ok"}}}}, {{"replies", {{{"status", "x"}}}}}}}},
       "rules[1].replies[0].status: must be an integer"},
      {{{"rules", {{"match", "x"}}}}, "rules: must be a list"},
      {{{"rules", {{{"match", "x"}}}}}, "rules[0].replies: missing"},
      {{{"rules", {{{"match", 3}, {"replies", {{"content", "ok"}}}}}}}, "rules[0].match: must be a string"},
      {{{"rules", {{{"replies", json::array()}}}}}, "rules[0].replies: must not be empty"},
      {{{"rules", {{{"replies", {{"content", 1}}}}}}}, "rules[0].replies.content: must be a string"},
      {{{"default", {{"status", 700}}}}, "default.status: must be an HTTP status"},
      {{{"default", {{"delay_s", -1}}}}, "default.delay_s: must be a non-negative number"},
      {{{"default", {{"headers", {{"Retry-After", 1}}}}}}, "default.headers.Retry-After: must be a string"},
      {{{"default", {{"usage", {{"prompt_tokens", "many"}}}}}}, "default.usage.prompt_tokens: must be a non-negative"},
      {{{"default", {{"content_file", "does/not/exist.txt"}}}}, "default.content_file: cannot read"},
      {{{"default", {{"content", "a"}, {"content_file", "b"}}}}, "default.content_file: give content or"},
      {{{"default", {{"contnet", "typo"}}}}, "default: unknown field \"contnet\""},
      {{{"rule", json::array()}}, "script: unknown field \"rule\""},
  };
  for (const auto& [script, expected] : cases) {
    try {
      ScriptedServer server(script);
      ADD_FAILURE() << "accepted " << script.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << script.dump() << "\n  got: " << e.what() << "\n  expected: " << expected;
    }
  }
}

TEST(ScriptedServerTest, FromFileRejectsAFileThatIsNotJson) {
  const std::filesystem::path file = std::filesystem::path(testing::TempDir()) / "chat_client_test_bad_script.json";
  std::ofstream(file) << "{ not json";
  EXPECT_THROW(ScriptedServer::FromFile(file), std::invalid_argument);
  EXPECT_THROW(ScriptedServer::FromFile(file.string() + ".missing"), std::invalid_argument);
  std::filesystem::remove(file);
}

TEST(ParseRetryAfterTest, SecondsDatesAndJunk) {
  const double now = 1445412480;  // Wed, 21 Oct 2015 07:28:00 GMT
  EXPECT_EQ(ParseRetryAfter("3", now), 3.0);
  EXPECT_EQ(ParseRetryAfter("0.5", now), 0.5);
  EXPECT_EQ(ParseRetryAfter(" 2 ", now), 2.0);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:10 GMT", now), 10.0);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), 0.0);  // already past
  EXPECT_EQ(ParseRetryAfter("", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1.2.3", now), std::nullopt);
}

TEST(ChatStatusNameTest, Names) {
  EXPECT_EQ(ChatStatusName(ChatStatus::kOk), "ok");
  EXPECT_EQ(ChatStatusName(ChatStatus::kTruncated), "truncated");
  EXPECT_EQ(ChatStatusName(ChatStatus::kHttpError), "http_error");
  EXPECT_EQ(ChatStatusName(ChatStatus::kTimeout), "timeout");
  EXPECT_EQ(ChatStatusName(ChatStatus::kTransportError), "transport_error");
  EXPECT_EQ(ChatStatusName(ChatStatus::kMalformed), "malformed");
}

}  // namespace
}  // namespace kernelgym::llm
