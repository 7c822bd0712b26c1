#include "policies/roles/roles.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/backend_info.h"
#include "policies/roles/reply_parsers.h"

namespace kernelgym::roles {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kPlanner: return "planner";
    case Role::kImplementer: return "implementer";
    case Role::kDebugger: return "debugger";
    case Role::kProfiler: return "profiler";
    case Role::kTuner: return "tuner";
  }
  return "planner";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : kAllRoles)
    if (RoleName(r) == name) return r;
  return std::nullopt;
}

const std::set<std::string>& KnownVariables() {
  static const std::set<std::string> known = {
      "task_id",  "task_description", "signature",   "backend",     "language", "hardware",
      "reference", "source",          "observation", "plan",        "history",  "failure",
      "attempts", "knobs",            "analysis",    "note",        "best_speedup", "steps_left",
  };
  return known;
}

std::optional<RoleSet> RoleSet::Load(const std::filesystem::path& dir, std::string& error) {
  RoleSet set;
  set.dir_ = dir;
  for (Role role : kAllRoles) {
    std::optional<PromptTemplate> t =
        PromptTemplate::Load(dir / (std::string(RoleName(role)) + ".md"), KnownVariables(), error);
    if (!t) return std::nullopt;
    set.templates_.emplace(role, std::move(*t));
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "hardware", ec)) {
    if (entry.path().extension() != ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    set.hardware_[entry.path().stem().string()] = text.str();
  }
  return set;
}

std::vector<llm::ChatMessage> RoleSet::Messages(Role role, const Variables& variables) const {
  const PromptTemplate& t = templates_.at(role);
  return {{"system", t.RenderSystem(variables)}, {"user", t.RenderUser(variables)}};
}

std::string RoleSet::HardwareNotes(std::string_view backend) const {
  const auto it = hardware_.find(backend);
  return it == hardware_.end() ? "" : it->second;
}

Variables TaskVariables(const protocol::TaskInfo& task, std::string_view backend, const RoleSet& roles) {
  Variables v;
  v["task_id"] = task.summary.id;
  v["task_description"] = task.summary.description;
  v["signature"] = task.summary.signature;
  v["backend"] = std::string(backend);
  v["language"] = std::string(FenceLanguage(backend));
  v["hardware"] = roles.HardwareNotes(backend);
  // The backend's own version of the task: its reference is what the kernel must match.
  if (const auto version = task.versions.find(std::string(backend)); version != task.versions.end())
    v["reference"] = version->second.reference_source;
  if (!task.knobs.empty()) {
    std::string knobs;
    for (const auto& [name, knob] : task.knobs) {
      std::string values;
      for (const protocol::KnobValue& value : knob.values)
        values += (values.empty() ? "" : ", ") + protocol::KnobValueToJson(value).dump();
      knobs += "- " + name + ": " + values + " (default " + protocol::KnobValueToJson(knob.default_value).dump() + ")\n";
    }
    v["knobs"] = knobs;
  }
  return v;
}

std::filesystem::path DefaultPromptsDir() {
  if (const char* env = std::getenv("KERNELGYM_PROMPTS"); env && *env) return env;
  return KERNELGYM_PROMPTS_DIR;
}

}  // namespace kernelgym::roles
