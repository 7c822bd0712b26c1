#include "policies/roles/assistant.h"

#include "datasets/trajectory/record_schema.h"

namespace kernelgym::roles {

nlohmann::json Exchange::ToJson() const {
  nlohmann::json sent = nlohmann::json::array();
  for (const llm::ChatMessage& m : messages) sent.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::json out = {{record::meta::kRole, RoleName(role)},
                        {record::meta::kMessages, sent},
                        {record::meta::kCompletion, outcome.content},
                        {record::meta::kStatus, llm::ChatStatusName(outcome.status)},
                        {"finish_reason", outcome.finish_reason},
                        {"usage", {{"prompt_tokens", outcome.usage.prompt_tokens},
                                   {"completion_tokens", outcome.usage.completion_tokens}}},
                        {"seconds", outcome.seconds},
                        {"attempts", outcome.attempts}};
  if (!outcome.error.empty()) out["error"] = outcome.error;
  if (!parse_error.empty()) out["parse_error"] = parse_error;
  return out;
}

Assistant::Assistant(llm::ChatClient& chat, const RoleSet& roles, int repairs)
    : chat_(chat), roles_(roles), repairs_(repairs) {}

std::optional<std::string> Assistant::Ask(Role role, const Variables& variables,
                                          const std::function<std::string(const std::string&)>& parse,
                                          std::vector<Exchange>& exchanges, std::string& error) {
  ++stats_.asks;
  std::vector<llm::ChatMessage> messages = roles_.Messages(role, variables);
  for (int attempt = 0; attempt <= repairs_; ++attempt) {
    Exchange exchange{role, messages, chat_.Complete(messages), ""};
    ++stats_.calls;
    const llm::ChatOutcome& outcome = exchange.outcome;
    // A cut reply may still hold everything the parser needs (e.g. a complete code block followed
    // by cut commentary), so it is parsed like a complete one.
    if (!outcome.ok() && outcome.status != llm::ChatStatus::kTruncated) {
      ++stats_.failed_calls;
      error = std::string(RoleName(role)) + ": " + outcome.error;
      exchanges.push_back(std::move(exchange));
      return std::nullopt;  // the client already retried what a retry could fix
    }
    const std::string problem = parse(outcome.content);
    if (problem.empty()) {
      exchanges.push_back(std::move(exchange));
      return outcome.content;
    }
    ++stats_.bad_replies;
    exchange.parse_error = problem;
    error = std::string(RoleName(role)) + ": unusable reply: " + problem;
    messages.push_back({"assistant", outcome.content});
    messages.push_back({"user", "Your reply could not be used: " + problem +
                                    (outcome.status == llm::ChatStatus::kTruncated
                                         ? " (it was cut off at the token limit: be shorter)"
                                         : "") +
                                    ". Answer again, complete, in exactly the requested format."});
    exchanges.push_back(std::move(exchange));
  }
  return std::nullopt;
}

namespace {

// Runs `parse` (reply -> a parser's XOrError) through Assistant::Ask and keeps the value it got.
template <typename Value, typename Parse, typename Pick>
std::optional<Value> AskParsed(Assistant& assistant, Role role, const Variables& variables, Parse parse, Pick pick,
                               std::vector<Exchange>& exchanges, std::string& error) {
  std::optional<Value> value;
  assistant.Ask(role, variables,
                [&](const std::string& reply) {
                  auto parsed = parse(reply);
                  value = pick(parsed);
                  return parsed.error;
                },
                exchanges, error);
  return value;
}

}  // namespace

std::optional<Plan> AskPlan(Assistant& assistant, const Variables& variables, std::vector<Exchange>& exchanges,
                            std::string& error) {
  return AskParsed<Plan>(
      assistant, Role::kPlanner, variables, [](const std::string& reply) { return ParsePlan(reply); },
      [](const PlanOrError& p) { return p.plan; }, exchanges, error);
}

std::optional<protocol::Action> AskKernelEdit(Assistant& assistant, Role role, std::string_view backend,
                                              const Variables& variables, std::vector<Exchange>& exchanges,
                                              std::string& error) {
  return AskParsed<protocol::Action>(
      assistant, role, variables, [&](const std::string& reply) { return ParseKernelEdit(reply, backend); },
      [](const ActionOrError& a) { return a.action; }, exchanges, error);
}

std::optional<Analysis> AskAnalysis(Assistant& assistant, const Variables& variables, std::vector<Exchange>& exchanges,
                                    std::string& error) {
  return AskParsed<Analysis>(
      assistant, Role::kProfiler, variables, [](const std::string& reply) { return ParseAnalysis(reply); },
      [](const AnalysisOrError& a) { return a.analysis; }, exchanges, error);
}

std::optional<TunerProposal> AskTuner(Assistant& assistant, std::string_view backend, bool needs_template,
                                      const Variables& variables, std::vector<Exchange>& exchanges,
                                      std::string& error) {
  return AskParsed<TunerProposal>(
      assistant, Role::kTuner, variables,
      [&](const std::string& reply) { return ParseTunerProposal(reply, backend, needs_template); },
      [](const TunerOrError& t) { return t.proposal; }, exchanges, error);
}

}  // namespace kernelgym::roles
