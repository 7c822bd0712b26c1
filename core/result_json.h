// EvalResult as JSON (the CLI's --json, later the trajectory store) and as text for a person.
// Serialization lives at this edge only.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace kernelgym {

// `include_samples`: the raw timing samples (large) are included only when asked. Every string
// in the JSON is valid UTF-8 (MakeResultTextValid), so dump() cannot throw on it.
nlohmann::json ResultToJson(const EvalResult& result, bool include_samples);
// The raw timing samples alone, as ResultToJson writes them under timing.samples (the trajectory
// store keeps them beside the observation, without the rest of the result a second time).
nlohmann::json TimingSamplesToJson(const std::vector<TimingSample>& samples);

// The exact inverse of ResultToJson(result, /*include_samples=*/true): how a result crosses a
// process boundary (the runner protocol) and comes back from the trajectory store. Strict: a
// missing, unknown or wrongly typed field is nullopt with `problem` naming its path
// ("result.timing.samples[3].candidate_ns: ..."). `samples` may be absent (include_samples =
// false gives no samples). A number may be null, read as NaN: JSON text cannot hold NaN or
// infinity and nlohmann writes them as null. Never throws.
[[nodiscard]] std::optional<EvalResult> ResultFromJson(const nlohmann::json& j, std::string& problem);

// Line `line` (1-based) of `source`; "" when it has no such line. For quoting the line a
// diagnostic points at.
std::string SourceLine(const std::string& source, int line);

// A report for a person: status, diagnostics with the offending source lines, correctness,
// timing with its interval, roofline and remarks. The verdict is the first and the last line;
// no line of the candidate's (its process's output, diagnostics about its source, its names)
// starts a line or carries a control character: see the layout note in result_json.cc.
std::string RenderResult(const EvalResult& result, const std::string& source);

// The TPU compiler's static estimate as a few lines for a reader (the plain report, the
// observation text): the estimated speedup when it is what a reward pays, why the estimate is not
// trusted, and per kernel its grid, bundles a step, estimated cycles and busiest units.
std::vector<std::string> RenderStaticEstimate(const EvalResult& result);

}  // namespace kernelgym
