// The LLM reply parsers (policies/roles/reply_parsers.h) on arbitrary model output: fenced blocks,
// SEARCH/REPLACE blocks, ```diff blocks and whole kernels (ParseKernelEdit), the profiler
// analyst's DECISION line, the tuner's ```json search space and template, and the plan.
//
// Properties: no crash, leak or UB (the parsers use std::regex on every line); each parser gives
// exactly one of a value and an error; a parsed kernel edit is an action the protocol accepts
// (it encodes into an env.step request that decodes to the same action) with the shape its kind
// promises; a DECISION reason is trimmed; a tuner template's placeholders are exactly the space's
// knobs and instantiating it leaves none; a plan has all five sections.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/text_safety.h"
#include "env/protocol/codec.h"
#include "policies/roles/reply_parsers.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym::roles {
namespace {

bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

void CheckKernelEdit(std::string_view reply, std::string_view backend) {
  const ActionOrError parsed = ParseKernelEdit(reply, backend);
  FUZZ_CHECK(parsed.action.has_value() == parsed.error.empty(), "exactly one of an action and an error");
  if (!parsed.action) return;
  if (const auto* edit = std::get_if<protocol::EditAction>(&*parsed.action)) {
    FUZZ_CHECK(!edit->edits.empty(), "an edit has blocks");
    for (const protocol::EditBlock& block : edit->edits) FUZZ_CHECK(!Blank(block.search), "a SEARCH part is not blank");
  } else if (const auto* replace = std::get_if<protocol::ReplaceAction>(&*parsed.action)) {
    FUZZ_CHECK(!Blank(replace->source), "a whole kernel is not blank");
  } else {
    FUZZ_CHECK(std::holds_alternative<protocol::PatchAction>(*parsed.action), "edit, patch or replace");
  }
  protocol::Request request;
  request.id = 7;
  request.body = protocol::EnvStepRequest{"e1", *parsed.action, nlohmann::json::object()};
  const protocol::DecodedRequest decoded = protocol::DecodeRequest(protocol::EncodeRequest(request));
  // A model's reply arrives as JSON text, which is UTF-8; bytes that are not are refused by the
  // server as such, never taken as an action.
  if (!IsValidUtf8(reply)) {
    FUZZ_CHECK(decoded.request || decoded.error.message.find("not valid UTF-8") != std::string::npos,
               "an action with invalid UTF-8 is refused as such: " + decoded.error.message);
    return;
  }
  FUZZ_CHECK(decoded.request && *decoded.request == request, "a parsed edit is a valid env.step action: " + decoded.error.message);
}

void CheckAnalysis(std::string_view reply) {
  const AnalysisOrError parsed = ParseAnalysis(reply);
  FUZZ_CHECK(parsed.analysis.has_value() == parsed.error.empty(), "exactly one of an analysis and an error");
  if (!parsed.analysis) return;
  const std::string& reason = parsed.analysis->reason;
  FUZZ_CHECK(reason.empty() || (!Blank(reason.substr(0, 1)) && !Blank(reason.substr(reason.size() - 1))),
             "the reason is trimmed: '" + reason + "'");
  FUZZ_CHECK(!DecisionName(parsed.analysis->decision).empty(), "a decision has a name");
}

void CheckTuner(std::string_view reply, std::string_view backend, bool needs_template) {
  const TunerOrError parsed = ParseTunerProposal(reply, backend, needs_template);
  FUZZ_CHECK(parsed.proposal.has_value() == parsed.error.empty(), "exactly one of a proposal and an error");
  if (!parsed.proposal) return;
  const TunerProposal& p = *parsed.proposal;
  FUZZ_CHECK(!p.space.empty(), "a proposal has knobs");
  std::map<std::string, protocol::KnobValue> first;
  bool at_in_values = false;
  for (const auto& [name, values] : p.space) {
    FUZZ_CHECK(!values.empty(), "knob " + name + " has values");
    first[name] = values.front();
    at_in_values |= protocol::KnobValueText(values.front()).find('@') != std::string::npos;
  }
  FUZZ_CHECK(needs_template || p.template_source.empty(), "no template unless asked for one");
  if (!needs_template) return;
  for (const auto& [name, values] : p.space)
    FUZZ_CHECK(p.template_source.find("@" + name + "@") != std::string::npos, "@" + name + "@ is in the template");
  const std::string instance = InstantiateTemplate(p.template_source, first);
  if (!at_in_values)
    for (const auto& [name, values] : p.space)
      FUZZ_CHECK(instance.find("@" + name + "@") == std::string::npos, "@" + name + "@ left after instantiation");
}

void CheckPlan(std::string_view reply) {
  const PlanOrError parsed = ParsePlan(reply);
  FUZZ_CHECK(parsed.plan.has_value() == parsed.error.empty(), "exactly one of a plan and an error");
  if (!parsed.plan) return;
  FUZZ_CHECK(parsed.plan->text == reply, "the plan keeps the whole reply");
  for (const char* section : kPlanSections) {
    const auto it = parsed.plan->sections.find(section);
    FUZZ_CHECK(it != parsed.plan->sections.end() && !Blank(it->second), std::string("section ") + section);
  }
}

}  // namespace
}  // namespace kernelgym::roles

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym::roles;
  const std::string_view reply(reinterpret_cast<const char*>(data), size);
  bool unterminated = false;
  for (const CodeBlock& block : FencedBlocks(reply, &unterminated))
    FUZZ_CHECK(block.language.find_first_of(" \t\r\n") == std::string::npos, "a fence's language is one word");
  for (const char* backend : {"cpu", "pallas", "cuda"}) CheckKernelEdit(reply, backend);
  CheckAnalysis(reply);
  for (bool needs_template : {false, true}) CheckTuner(reply, "cpu", needs_template);
  CheckPlan(reply);
  return 0;
}
