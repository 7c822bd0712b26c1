#include "env/server/records.h"

#include <chrono>
#include <variant>

#include "tpu_runner/result_json.h"

namespace kernelgym::server {
namespace {

using nlohmann::json;

json Base(const RecordContext& c, const char* kind, int64_t step, const protocol::Observation& observation,
          const EvalResult* result) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  json samples = json::array();
  if (result && result->timing) {
    const json full = ResultToJson(*result, /*include_samples=*/true);
    if (full.contains("timing") && full["timing"].contains("samples")) samples = full["timing"]["samples"];
  }
  return {{"kind", kind},
          {"time", now},
          {"versions", {{"kernelgym", KERNELGYM_VERSION}, {"protocol", protocol::kVersion}}},
          {"env", c.env},
          {"episode", c.episode},
          {"task", c.task},
          {"backend", c.backend},
          {"seed", c.seed},
          {"step", step},
          {"observation", protocol::ToWire(observation)},
          {"runner", c.runner},
          {"timing_samples", std::move(samples)}};
}

}  // namespace

json ActionToJson(const protocol::Action& action) {
  json j{{"kind", std::string(protocol::ActionKind(action))}};
  if (const auto* a = std::get_if<protocol::ReplaceAction>(&action)) {
    j["source"] = a->source;
  } else if (const auto* a = std::get_if<protocol::EditAction>(&action)) {
    j["edits"] = json::array();
    for (const auto& b : a->edits) j["edits"].push_back({{"search", b.search}, {"replace", b.replace}});
  } else if (const auto* a = std::get_if<protocol::PatchAction>(&action)) {
    j["diff"] = a->diff;
  } else if (const auto* a = std::get_if<protocol::KnobsAction>(&action)) {
    j["values"] = json::object();
    for (const auto& [name, value] : a->values) std::visit([&](const auto& v) { j["values"][name] = v; }, value);
  } else if (const auto* a = std::get_if<protocol::RevertAction>(&action)) {
    j["to_step"] = a->to_step;
  }
  return j;
}

std::string ResetRecord(const RecordContext& context, const protocol::ResetResult& reset, const EvalResult* result) {
  json record = Base(context, "reset", 0, reset.observation, result);
  record["info"] = reset.info;
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string TransitionRecord(const RecordContext& context, const protocol::Action& action, const std::string& prompt,
                             const protocol::StepResult& step, const EvalResult* result) {
  json record = Base(context, "transition", step.observation.step, step.observation, result);
  record["action"] = ActionToJson(action);
  record["prompt"] = prompt;
  record["reward"] = step.reward;
  record["terminated"] = step.terminated;
  record["truncated"] = step.truncated;
  record["info"] = step.info;
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kernelgym::server
