// Asking a role and getting back something usable: one chat call per ask, the reply parsed by the
// role's parser, and — when the reply cannot be used (no code, a missing plan section, a cut
// reply) — a repair turn that shows the model its reply and the parser's complaint. Every call is
// kept as an Exchange, so a policy can record the prompts and completions with its steps (the
// env.step `meta`) and nothing the model said is lost.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "policies/llm/chat_client.h"
#include "policies/roles/reply_parsers.h"
#include "policies/roles/roles.h"

namespace kernelgym::roles {

// One chat call and what became of it.
struct Exchange {
  Role role = Role::kPlanner;
  std::vector<llm::ChatMessage> messages;  // as sent
  llm::ChatOutcome outcome;
  std::string parse_error;  // set when the reply was received but could not be used
  // The record form (docs/dataset.md, "meta"): role, messages, completion, status, finish_reason,
  // error, parse_error, usage, seconds, attempts.
  nlohmann::json ToJson() const;
};

// Counts over an Assistant's asks.
struct AskStats {
  int asks = 0;         // Ask() calls
  int calls = 0;        // chat calls, repairs included
  int bad_replies = 0;  // replies that came back but could not be used
  int failed_calls = 0; // chat calls that got no reply (after the client's retries)
};

class Assistant {
 public:
  // Both must outlive the Assistant. The ChatClient is thread-safe; an Assistant is not.
  Assistant(llm::ChatClient& chat, const RoleSet& roles, int repairs = 1);

  // Renders the role's prompt, calls the model and hands the reply to `parse`, which returns ""
  // when it could use the reply or the reason it could not. On a reason, up to `repairs` more
  // calls follow, each adding the bad reply and the reason to the conversation. Returns the text of
  // the reply `parse` accepted, or nullopt (then `error` says why: the last parse error or the
  // chat failure). Every call made is appended to `exchanges`.
  std::optional<std::string> Ask(Role role, const Variables& variables,
                                 const std::function<std::string(const std::string& reply)>& parse,
                                 std::vector<Exchange>& exchanges, std::string& error);

  const AskStats& stats() const { return stats_; }
  llm::ChatClient& chat() { return chat_; }
  const RoleSet& roles() const { return roles_; }

 private:
  llm::ChatClient& chat_;
  const RoleSet& roles_;
  int repairs_;
  AskStats stats_;
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
