// Reading what a model wrote. Each role's reply has a fixed shape (its prompt file asks for it);
// these functions turn the text into a value or say precisely what is missing, so a bad reply is
// counted and answered with a repair request instead of crashing the run or being sent to the
// environment as garbage.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "env/protocol/messages.h"

namespace kernelgym::roles {

// ---- fenced code ----
struct CodeBlock {
  std::string language;  // the fence's info string ("cpp", "python", "diff", "json", or "")
  std::string text;
};
// Every ``` fenced block, in order. `unterminated` is set when the reply ends inside a block
// (typically a reply cut at max_tokens); that block is not returned.
std::vector<CodeBlock> FencedBlocks(std::string_view reply, bool* unterminated = nullptr);

// ---- planner ----
// The plan's fixed sections, in order; a heading ("## Analysis", "**Strategy**", "3. Memory and
// tiling layout:") is matched by its key words, case-insensitively.
inline constexpr const char* kPlanSections[] = {"Analysis", "Strategy", "Memory and tiling layout",
                                                "Hardware-specific optimizations", "Expected impact"};
struct Plan {
  std::map<std::string, std::string> sections;  // by kPlanSections name
  std::string text;                             // the whole reply, as the implementer gets it
};
struct PlanOrError {
  std::optional<Plan> plan;
  std::string error;  // e.g. "the plan has no section(s): Strategy, Expected impact"
};
PlanOrError ParsePlan(std::string_view reply);

// ---- implementer and debugger: the kernel edit ----
// In order of preference: SEARCH/REPLACE blocks (an `edit`), a ```diff block (a `patch`), or the
// last fenced block in the backend's language (a `replace` of the whole source; ```cpp/c++/c for
// cpu, ```python/py for pallas, ```cuda/cpp for cuda; an untagged block is accepted too).
//   <<<<<<< SEARCH
//   exact lines of the current source
//   =======
//   their replacement
//   >>>>>>> REPLACE
struct ActionOrError {
  std::optional<protocol::Action> action;
  std::string error;  // "no code block ...", "unterminated code block (the reply was cut?)", ...
};
ActionOrError ParseKernelEdit(std::string_view reply, std::string_view backend);

// ---- profiler analyst ----
enum class Decision { kContinue, kTune, kStop };
std::string_view DecisionName(Decision d);  // "continue", "tune", "stop"
struct Analysis {
  std::string bottlenecks;  // the reply without the decision line
  Decision decision = Decision::kContinue;
  std::string reason;       // the text after the decision keyword
};
struct AnalysisOrError {
  std::optional<Analysis> analysis;
  std::string error;
};
// Needs one line "DECISION: CONTINUE|TUNE|STOP [- reason]" (any case, optional markdown emphasis).
AnalysisOrError ParseAnalysis(std::string_view reply);

// ---- tuner ----
// A search space over knobs. For a task with a template, the knobs are the template's (values
// must come from its domains); otherwise the tuner also writes a templated kernel in which each
// knob appears as @NAME@ (upper-case letters, digits, '_'; at most 64 of them), instantiated by
// plain substitution.
// (@NAME@ rather than {{NAME}}: the prompt files themselves use {{...}}.)
struct TunerProposal {
  std::string template_source;                                   // empty: the task's own template
  std::map<std::string, std::vector<protocol::KnobValue>> space;  // knob -> values to try
};
struct TunerOrError {
  std::optional<TunerProposal> proposal;
  std::string error;
};
// Reads a ```json block {"space": {"NAME": [values...]}} and, when `needs_template`, the last
// code block in the backend's language; every @NAME@ in it must be in the space and vice versa.
TunerOrError ParseTunerProposal(std::string_view reply, std::string_view backend, bool needs_template);
// The template with each @NAME@ replaced by the value (integers as digits, strings verbatim).
std::string InstantiateTemplate(const std::string& template_source, const std::map<std::string, protocol::KnobValue>& values);

// The fence language a backend's kernels are written in ("cpp", "python", "cuda").
std::string_view FenceLanguage(std::string_view backend);

}  // namespace kernelgym::roles
