// The speedup an evaluation was paid for, one rule for every policy that reads a step (the
// evaluate policies, the learned side's measurement store): the observation's measured speedup,
// or off a TPU a pallas evaluation's trusted estimate, which the step's info carries as
// `estimated_speedup` with `speedup_kind: "estimated"` (the observation's `speedup` never does).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "env/protocol/results.h"

namespace kernelgym::policies {

// 0 when none was paid (a failed step, an untrusted estimate). Sets `kind` ("measured",
// "estimated") when one was.
double PaidSpeedup(const protocol::Observation& o, const nlohmann::json& info, std::string& kind);

}  // namespace kernelgym::policies
