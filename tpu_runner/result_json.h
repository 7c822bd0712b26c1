// EvalResult as JSON (the CLI's --json, later the trajectory store) and as text for a person.
// Serialization lives at this edge only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tpu_runner/result.h"

namespace kernelgym {

// `include_samples`: the raw timing samples (large) are included only when asked.
nlohmann::json ResultToJson(const EvalResult& result, bool include_samples);

// A report for a person: status, diagnostics with the offending source lines, correctness,
// timing with its interval, roofline and remarks.
std::string RenderResult(const EvalResult& result, const std::string& source);

}  // namespace kernelgym
