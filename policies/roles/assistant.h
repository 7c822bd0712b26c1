// Asking a role and getting back something usable: one chat call per ask, the reply parsed by the
// role's parser, and — when the reply cannot be used (no code, a missing plan section, a cut
// reply) — a repair turn that shows the model its reply and the parser's complaint. Every call is
// kept as an Exchange, so a policy can record the prompts and completions with its steps (the
// env.step `meta`) and nothing the model said is lost.
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "policies/llm/chat_client.h"
#include "policies/roles/model_reply.h"
#include "policies/roles/reply_parsers.h"
#include "policies/roles/roles.h"

namespace kernelgym::roles {

// One chat call and what became of it.
struct Exchange {
  Role role = Role::kPlanner;
  std::vector<llm::ChatMessage> messages;  // as sent
  llm::ChatOutcome outcome;
  ModelReply reply;         // the outcome read (ReadModelReply): what the parser saw, and the thinking
  std::string parse_error;  // set when the reply was received but could not be used
  bool produced_step = true;  // false: this exchange led to no step (see record::meta::kProducedStep)
  // The record form (docs/dataset.md, "meta"): role, messages, completion (the answer, without
  // thinking), reasoning, tool_calls, status, finish_reason, error, parse_error, usage (with
  // "estimated"), seconds, attempts, produced_step.
  nlohmann::json ToJson() const;
};

// Marks every exchange as having led to no step (an ask that failed, a proposal refused).
void MarkProducedNoStep(std::vector<Exchange>& exchanges);
// Appends the exchanges' record forms to a step's meta["exchanges"] (docs/dataset.md, "meta");
// leaves `meta` as it is when there are none.
void AppendExchanges(const std::vector<Exchange>& exchanges, nlohmann::json& meta);

// Counts over an Assistant's asks.
struct AskStats {
  int asks = 0;         // Ask() calls
  int calls = 0;        // chat calls, repairs included
  int bad_replies = 0;  // replies that came back but could not be used
  int failed_calls = 0; // chat calls that got no reply (after the client's retries)
  int refused = 0;      // asks not sent: a budget was spent or the endpoint is unusable
};

class Assistant {
 public:
  // Both must outlive the Assistant. Thread-safe, like the ChatClient: asks may run in parallel.
  Assistant(llm::ChatClient& chat, const RoleSet& roles, int repairs = 1);

  // Calls in a row that got no reply (after the client's retries) before the endpoint is
  // declared unusable.
  static constexpr int kMaxFailuresInARow = 2;

  // Renders the role's prompt, calls the model and hands the reply to `parse`, which returns ""
  // when it could use the reply or the reason it could not. On a reason, up to `repairs` more
  // calls follow, each adding the bad reply and the reason to the conversation. Returns the text of
  // the reply `parse` accepted, or nullopt (then `error` says why: the last parse error or the
  // chat failure). Every call made is appended to `exchanges`.
  std::optional<std::string> Ask(Role role, const Variables& variables,
                                 const std::function<std::string(const std::string& reply)>& parse,
                                 std::vector<Exchange>& exchanges, std::string& error);

  AskStats stats() const;
  // Why asking again is pointless ("" while it is not): the endpoint refused in a way no retry
  // fixes (ChatOutcome::fatal(): a bad key, model, URL or request field), a budget is spent, or
  // kMaxFailuresInARow calls in a row got no reply. Policies stop on it instead of re-asking every
  // round; once set, Ask() returns nullopt without calling.
  std::string unusable() const;
  // unusable() for a reason other than a spent budget: the endpoint failed the run.
  bool endpoint_failed() const;
  // A new run (an episode) starts: a spent time budget is forgotten (the next run has its own
  // deadline); a refusal for good, and spent token or cost budgets (checked again at every call),
  // are not.
  void BeginRun();
  // Whether any call of this run got a usable reply (an honest exit: a run that never did failed).
  bool any_usable_reply() const;
  llm::ChatClient& chat() { return chat_; }
  const RoleSet& roles() const { return roles_; }

 private:
  void Note(const llm::ChatOutcome& outcome, bool usable);

  llm::ChatClient& chat_;
  const RoleSet& roles_;
  int repairs_;
  mutable std::mutex mutex_;
  AskStats stats_;            // guarded by mutex_
  std::string unusable_;      // guarded by mutex_
  bool unusable_budget_ = false;  // guarded by mutex_: unusable_ is a spent budget
  int failures_in_a_row_ = 0; // guarded by mutex_
  bool any_usable_ = false;   // guarded by mutex_
};

// Each role's ask with its reply parser (reply_parsers.h): the parsed value, or nullopt with
// `error` (every call made is appended to `exchanges`, as for Ask).
std::optional<Plan> AskPlan(Assistant& assistant, const Variables& variables, std::vector<Exchange>& exchanges,
                            std::string& error);
// The implementer's or the debugger's edit of the kernel, in the backend's language.
std::optional<protocol::Action> AskKernelEdit(Assistant& assistant, Role role, std::string_view backend,
                                              const Variables& variables, std::vector<Exchange>& exchanges,
                                              std::string& error);
std::optional<Analysis> AskAnalysis(Assistant& assistant, const Variables& variables, std::vector<Exchange>& exchanges,
                                    std::string& error);
std::optional<TunerProposal> AskTuner(Assistant& assistant, std::string_view backend, bool needs_template,
                                      const Variables& variables, std::vector<Exchange>& exchanges,
                                      std::string& error);

}  // namespace kernelgym::roles
