#include "env/server/records.h"

#include <chrono>
#include <variant>

#include "core/result_json.h"
#include "datasets/trajectory/record_schema.h"

namespace kernelgym::server {
namespace {

using nlohmann::json;

json Base(const RecordContext& c, const char* kind, int64_t step, const protocol::Observation& observation,
          const EvalResult* result) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  json samples = result && result->timing ? TimingSamplesToJson(result->timing->samples) : json::array();
  using namespace record;
  return {{kKind, kind},
          {kTime, now},
          {kVersions, {{kVersionKernelgym, KERNELGYM_VERSION}, {kVersionProtocol, protocol::kVersion}}},
          {kEnv, c.env},
          {kEpisode, c.episode},
          {kTask, c.task},
          {kBackend, c.backend},
          {kSeed, c.seed},
          {kStep, step},
          {kObservation, protocol::ToWire(observation)},
          {kRunner, c.runner},
          {kTimingSamples, std::move(samples)}};
}

}  // namespace


std::string ResetRecord(const RecordContext& context, const protocol::ResetResult& reset, const EvalResult* result) {
  json out = Base(context, record::kKindReset, 0, reset.observation, result);
  out[record::kInfo] = reset.info;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string TransitionRecord(const RecordContext& context, const protocol::Action& action, const std::string& prompt,
                             const json& meta, const protocol::StepResult& step, const EvalResult* result) {
  json out = Base(context, record::kKindTransition, step.observation.step, step.observation, result);
  out[record::kAction] = protocol::ActionToJson(action);
  out[record::kPrompt] = prompt;
  out[record::kReward] = step.reward;
  out[record::kTerminated] = step.terminated;
  out[record::kTruncated] = step.truncated;
  out[record::kInfo] = step.info;
  if (meta.is_object() && !meta.empty()) out[record::kMeta] = meta;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kernelgym::server
