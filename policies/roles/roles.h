// MaxKernel's sub-agents as roles: each a prompt template in a file (prompts/<role>.md) plus the
// reply parser (reply_parsers.h) for the shape that prompt asks for. The roles know nothing of the
// loop that uses them (policies/agent) or of the transport (policies/llm): they turn variables
// into chat messages.
//
//   planner      an optimization plan with fixed sections for the task's backend
//   implementer  writes the kernel or edits it (replace / SEARCH-REPLACE / diff)
//   debugger     fixes a compile or correctness failure, knowing the attempts that failed
//   profiler     the profiler analyst: bottlenecks from the observation's profile, and whether
//                more speed is likely (DECISION: CONTINUE | TUNE | STOP)
//   tuner        a knob search space (and a templated kernel when the task has no template)
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "env/protocol/task_info.h"
#include "policies/llm/chat_client.h"
#include "policies/roles/prompt_template.h"

namespace kernelgym::roles {

enum class Role { kPlanner, kImplementer, kDebugger, kProfiler, kTuner };
inline constexpr std::array<Role, 5> kAllRoles = {Role::kPlanner, Role::kImplementer, Role::kDebugger,
                                                  Role::kProfiler, Role::kTuner};
std::string_view RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

// The variables a prompt file may use (docs/agent.md lists what each holds). A policy fills the
// ones it knows; an unset one renders as "" and its {{#name}} sections are skipped.
const std::set<std::string>& KnownVariables();

class RoleSet {
 public:
  // Loads prompts/<role>.md for every role and prompts/hardware/<backend>.md for every backend
  // that has one. nullopt with `error` (naming the file and line) when a file is missing or bad.
  static std::optional<RoleSet> Load(const std::filesystem::path& dir, std::string& error);

  // The chat messages of one request: the system part, then the user part.
  std::vector<llm::ChatMessage> Messages(Role role, const Variables& variables) const;
  // The hardware notes for a backend ("" when there are none).
  std::string HardwareNotes(std::string_view backend) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::map<Role, PromptTemplate> templates_;
  std::map<std::string, std::string, std::less<>> hardware_;
};

// The variables that describe a task, from its tasks.get map: task_id, task_description,
// signature, backend, language, hardware (the backend's notes), reference (the backend's
// reference source) and knobs ("- NAME: values (default d)" per knob of its template; "" without).
Variables TaskVariables(const protocol::TaskInfo& task, std::string_view backend, const RoleSet& roles);

// $KERNELGYM_PROMPTS when set, else the source tree's policies/roles/prompts.
std::filesystem::path DefaultPromptsDir();

}  // namespace kernelgym::roles
