// The trajectory store's records (docs/dataset.md has the schema): one JSON line per reset and
// per step, built from the episode's plain types at this edge.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"
#include "env/protocol/messages.h"
#include "env/protocol/results.h"

namespace kernelgym::server {

struct RecordContext {
  std::string env, episode, task, backend;
  uint64_t seed = 0;
  nlohmann::json runner = nlohmann::json::object();  // the runner's fingerprint
};

// `result`: the evaluation behind the observation (its raw timing samples are recorded); may be
// null (an invalid action or a re-used evaluation: no new samples).
std::string ResetRecord(const RecordContext& context, const protocol::ResetResult& reset, const EvalResult* result);
// `meta`: the step request's meta map, recorded as is when it is not empty.
std::string TransitionRecord(const RecordContext& context, const protocol::Action& action, const std::string& prompt,
                             const nlohmann::json& meta, const protocol::StepResult& step, const EvalResult* result);

}  // namespace kernelgym::server
