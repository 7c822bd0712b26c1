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
  std::string language;  // the fence's language, lower case ("cpp", "python", "diff", "json", or "")
  std::string text;
};
// Every ``` fenced block, in order. The language is the info string's first word up to a ':' or
// '{' ("```cpp:kernel.cpp", "```cpp {.numberLines}" and "```C++ title=k.cpp" are cpp/c++).
// `unterminated` is set when the reply ends inside a block (typically a reply cut at max_tokens);
// that block is not returned.
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
// fenced block in the backend's language that is the kernel (a `replace` of the whole source;
// ```cpp/c++/c for cpu, ```python/py for pallas, ```cuda/cpp for cuda; an untagged block is
// accepted too). The kernel is the last block that defines `entry_point` (a C-style definition
// `NAME(...) {` or a Python `def NAME(`): models add "call it like this" snippets after the kernel,
// and position alone would pick the snippet. With no entry point given, or no block defining it,
// the last block in the language.
//   <<<<<<< SEARCH
//   exact lines of the current source
//   =======
//   their replacement
//   >>>>>>> REPLACE
struct ActionOrError {
  std::optional<protocol::Action> action;
  std::string error;  // "no code block ...", "unterminated code block (the reply was cut?)", ...
};
ActionOrError ParseKernelEdit(std::string_view reply, std::string_view backend, std::string_view entry_point = {});
// The function a task's kernel must define: the identifier before the signature's '('
// ("void kernel(const float* x, ...)" -> "kernel"); "" when there is none.
std::string EntryPoint(std::string_view signature);
// Whether `code` defines the function `name` (see ParseKernelEdit).
bool DefinesFunction(std::string_view code, std::string_view name);

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
// Needs a line "DECISION: CONTINUE|TUNE|STOP [- reason]" (any case, optional markdown emphasis);
// with several, the last one is the decision (a model revises itself; the reply reader has
// already removed any thinking).
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
