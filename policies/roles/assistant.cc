#include "policies/roles/assistant.h"

#include "datasets/trajectory/record_schema.h"

namespace kernelgym::roles {

nlohmann::json Exchange::ToJson() const {
  nlohmann::json sent = nlohmann::json::array();
  for (const llm::ChatMessage& m : messages) sent.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::json out = {{record::meta::kRole, RoleName(role)},
                        {record::meta::kMessages, sent},
                        {record::meta::kCompletion, reply.answer},
                        {record::meta::kStatus, llm::ChatStatusName(outcome.status)},
                        {"finish_reason", outcome.finish_reason},
                        {"usage", {{"prompt_tokens", outcome.usage.prompt_tokens},
                                   {"completion_tokens", outcome.usage.completion_tokens},
                                   {"estimated", outcome.usage.estimated}}},
                        {"seconds", outcome.seconds},
                        {"attempts", outcome.attempts},
                        {record::meta::kProducedStep, produced_step}};
  if (!reply.reasoning.empty()) out[record::meta::kReasoning] = reply.reasoning;
  if (!outcome.tool_calls.empty()) {
    nlohmann::json calls = nlohmann::json::array();
    for (const llm::ChatToolCall& call : outcome.tool_calls) calls.push_back({{"name", call.name}, {"arguments", call.arguments}});
    out["tool_calls"] = calls;
  }
  if (!outcome.error.empty()) out["error"] = outcome.error;
  if (!parse_error.empty()) out["parse_error"] = parse_error;
  return out;
}

void MarkProducedNoStep(std::vector<Exchange>& exchanges) {
  for (Exchange& e : exchanges) e.produced_step = false;
}

void AppendExchanges(const std::vector<Exchange>& exchanges, nlohmann::json& meta) {
  if (exchanges.empty()) return;
  nlohmann::json& recorded = meta[record::meta::kExchanges];
  if (!recorded.is_array()) recorded = nlohmann::json::array();
  for (const Exchange& e : exchanges) recorded.push_back(e.ToJson());
}

Assistant::Assistant(llm::ChatClient& chat, const RoleSet& roles, int repairs)
    : chat_(chat), roles_(roles), repairs_(repairs) {}

AskStats Assistant::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string Assistant::unusable() const {
  std::lock_guard lock(mutex_);
  return unusable_;
}

bool Assistant::endpoint_failed() const {
  std::lock_guard lock(mutex_);
  return !unusable_.empty() && !unusable_budget_;
}

void Assistant::BeginRun() {
  std::lock_guard lock(mutex_);
  failures_in_a_row_ = 0;
  any_usable_ = false;
  if (unusable_budget_) {
    unusable_.clear();
    unusable_budget_ = false;
  }
}

bool Assistant::any_usable_reply() const {
  std::lock_guard lock(mutex_);
  return any_usable_;
}

void Assistant::Note(const llm::ChatOutcome& outcome, bool usable) {
  std::lock_guard lock(mutex_);
  const bool refused = outcome.status == llm::ChatStatus::kBudget;  // nothing was sent: not a call
  const bool no_reply = !refused && !outcome.ok() && outcome.status != llm::ChatStatus::kTruncated;
  if (refused) ++stats_.refused;
  else ++stats_.calls;
  if (no_reply) ++stats_.failed_calls;
  else if (!refused && !usable) ++stats_.bad_replies;
  if (usable) any_usable_ = true;
  failures_in_a_row_ = no_reply ? failures_in_a_row_ + 1 : 0;
  if (!unusable_.empty()) return;
  if (refused) {
    unusable_ = outcome.error;
    unusable_budget_ = true;
  } else if (outcome.fatal()) {
    unusable_ = "the endpoint refused the request: " + outcome.error;
  } else if (failures_in_a_row_ >= kMaxFailuresInARow) {
    unusable_ = std::to_string(failures_in_a_row_) + " calls in a row got no reply; the last: " + outcome.error;
  }
}

namespace {

// The repair turn after an unusable reply: what was wrong, and what to do differently.
std::string RepairRequest(const Exchange& exchange, const std::string& problem) {
  const llm::ChatOutcome& outcome = exchange.outcome;
  if (outcome.status == llm::ChatStatus::kTruncated && exchange.reply.answer.empty()) {
    return "Your reply was cut off at the token limit (" + std::to_string(outcome.max_tokens) +
           " tokens) while you were still reasoning, before any answer. Think more briefly and give the answer, "
           "complete, in exactly the requested format.";
  }
  return "Your reply could not be used: " + problem +
         (outcome.status == llm::ChatStatus::kTruncated ? " (it was cut off at the token limit: be shorter)" : "") +
         ". Answer again, complete, in exactly the requested format.";
}

}  // namespace

std::optional<std::string> Assistant::Ask(Role role, const Variables& variables,
                                          const std::function<std::string(const std::string&)>& parse,
                                          std::vector<Exchange>& exchanges, std::string& error) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.asks;
    if (!unusable_.empty()) {
      ++stats_.refused;
      error = std::string(RoleName(role)) + ": not asked: " + unusable_;
      return std::nullopt;
    }
  }
  std::vector<llm::ChatMessage> messages = roles_.Messages(role, variables);
  const std::size_t first = exchanges.size();
  for (int attempt = 0; attempt <= repairs_; ++attempt) {
    Exchange exchange;
    exchange.role = role;
    exchange.messages = messages;
    exchange.outcome = chat_.Complete(messages);
    exchange.reply = ReadModelReply(exchange.outcome);
    const llm::ChatOutcome& outcome = exchange.outcome;
    // A cut reply may still hold everything the parser needs (e.g. a complete code block followed
    // by cut commentary), so it is parsed like a complete one.
    if (!outcome.ok() && outcome.status != llm::ChatStatus::kTruncated) {
      Note(outcome, false);
      error = std::string(RoleName(role)) + ": " + outcome.error;
      exchanges.push_back(std::move(exchange));
      break;  // the client already retried what a retry could fix
    }
    const std::string problem = parse(exchange.reply.answer);
    Note(outcome, problem.empty());
    if (problem.empty()) {
      std::string answer = exchange.reply.answer;
      exchanges.push_back(std::move(exchange));
      return answer;
    }
    exchange.parse_error = problem;
    error = std::string(RoleName(role)) + ": unusable reply: " + problem;
    messages.push_back({"assistant", exchange.reply.answer});
    messages.push_back({"user", RepairRequest(exchange, problem)});
    exchanges.push_back(std::move(exchange));
  }
  // Nothing usable came of this ask: its exchanges lead to no step.
  for (std::size_t i = first; i < exchanges.size(); ++i) exchanges[i].produced_step = false;
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
  // The task's entry point picks the kernel among several code blocks (ParseKernelEdit).
  const auto signature = variables.find("signature");
  const std::string entry_point = signature == variables.end() ? "" : EntryPoint(signature->second);
  return AskParsed<protocol::Action>(
      assistant, role, variables,
      [&](const std::string& reply) { return ParseKernelEdit(reply, backend, entry_point); },
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
