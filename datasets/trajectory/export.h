// Turning stored records into training-ready JSONL (docs/dataset.md, "Export formats"):
//   transitions  one flat row per transition — scalar columns only (the action re-serialized as a
//                JSON string), so pandas.read_json(lines=True) gives a clean DataFrame.
//   sft          one chat example per improving step (status "ok" and reward > 0): the user turn
//                is the prompt the policy saw, the assistant turn the action as text — the
//                "messages" shape TRL / Hugging Face SFT trainers read.
//   chat         one chat example per usable LLM exchange recorded in a step's meta (an LLM
//                policy's prompts and its completion: the role's own SFT data), with the role, the
//                step's reward and status so they can be filtered.
// Rows are ordered_json so the columns come out in the documented order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/trajectory/reader.h"

namespace kernelgym {

enum class ExportFormat { kTransitions, kSft, kChat };

std::optional<ExportFormat> ParseExportFormat(std::string_view name);  // "transitions", "sft", "chat"
std::string_view ExportFormatName(ExportFormat format);

// The flat row of a transition record; nullopt for any other kind. Missing fields are null.
std::optional<nlohmann::ordered_json> TransitionRow(const nlohmann::json& record);

// The SFT example of a transition record; nullopt when the record is not an improving step
// (kind "transition", observation.status "ok", reward > 0, a non-empty prompt) or its action
// cannot be rendered.
std::optional<nlohmann::ordered_json> SftExample(const nlohmann::json& record);

// An action as a policy would write it: a fenced code block of the whole source for replace
// (```cpp, or ```python for the pallas backend, ```cuda for cuda), SEARCH/REPLACE blocks for
// edit, a ```diff block for patch, the action's JSON for knobs and revert, "SUBMIT" for submit.
// nullopt for an unknown kind or a missing / mistyped field.
std::optional<std::string> RenderActionText(const nlohmann::json& action, std::string_view backend);

// The chat examples of a transition record's meta.exchanges: those whose call succeeded and whose
// reply was usable (no parse_error). Empty for any other record.
std::vector<nlohmann::ordered_json> ChatExamples(const nlohmann::json& record);

struct ExportSummary {
  uint64_t records = 0;     // records read
  uint64_t rows = 0;        // lines written
  uint64_t duplicates = 0;  // transitions left out by ExportOptions::dedup
};

struct ExportOptions {
  // Leave out a transition whose kernel (task, backend, observation.source) an earlier transition
  // of the export already had: a dataset of distinct kernels (the first evaluation of each).
  bool dedup = false;
};

// Reads every record from `reader` and writes one JSON line per row to `out`. Problems in the
// store are left in reader.stats().
ExportSummary ExportRecords(TrajectoryReader& reader, ExportFormat format, std::ostream& out,
                            const ExportOptions& options = {});

}  // namespace kernelgym
