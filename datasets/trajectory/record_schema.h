// The trajectory record: what one line of the store holds. The server writes these (one per reset,
// one per step); the reader, the exporters and the stats read them. Field names live here only,
// as constants, so a rename is one edit; docs/dataset.md is the prose version of this file.
//
// Every record is one JSON object on one line:
//
//   kind            "reset" | "transition"
//   time            unix seconds (float) when the server produced the record
//   versions        {"kernelgym": "0.1.0", "protocol": 1}
//   env             the env id the client used
//   episode         an id unique per reset (a fork starts a new episode at its next reset)
//   task            task id, "suite/name"
//   backend         "cpu" | "pallas" | "cuda" | ...
//   seed            the reset's seed (uint64)
//   step            0 for reset, 1.. for transitions
//   observation     the structured observation after the reset / step — the protocol's
//                   Observation wire map: step, status, stage, message, action_error, reused,
//                   speedup, speedup_ci_low, speedup_ci_high, best_speedup, steps_left,
//                   seconds_left, source, report (the evaluation record, docs/results.md,
//                   without raw samples), text (Markdown for LLMs), features (numbers)
//   runner          {name: fingerprint string}: the runner and machine that evaluated
//                   (host, cpu model, compiler, libtorch version, ...)
//   timing_samples  array of maps (the raw timing samples; may be empty)
//   info            the reset's or step's `info` map as the client got it (seed, runner,
//                   eval_seconds, attempts; for steps also action, outcome, reused, submit)
//
// Transitions add:
//   action          the action as sent: {"kind":"replace","source"} | {"kind":"edit","edits":
//                   [{"search","replace"}]} | {"kind":"patch","diff"} | {"kind":"knobs",
//                   "values":{...}} | {"kind":"revert","to_step"} | {"kind":"submit"}
//   prompt          the Markdown text of the observation the action was chosen from (the
//                   previous observation's `text`), so a record is a complete (prompt, action,
//                   outcome) triple without joining on the previous line
//   reward          number
//   terminated      bool (submit)
//   truncated       bool (step or time budget spent)
//   meta            the step request's `meta` map, when the policy sent a non-empty one: e.g. an
//                   LLM policy's {"policy": "llm-agent", "model", "exchanges": [{"role", "messages":
//                   [{role, content}], "completion", "status", "usage", "seconds"}]} — every chat
//                   exchange that led to this action (docs/dataset.md, "meta")
//
// Readers tolerate missing fields (an exporter writes null for them) and ignore unknown ones, so
// a field can be added without a migration; renaming or removing one is a breaking change.
#pragma once

// Plain C strings so they work as nlohmann::json keys with every supported version.
namespace kernelgym::record {

// Values of kKind.
inline constexpr const char* kKindReset = "reset";
inline constexpr const char* kKindTransition = "transition";

// Every record.
inline constexpr const char* kKind = "kind";
inline constexpr const char* kTime = "time";
inline constexpr const char* kVersions = "versions";
inline constexpr const char* kVersionKernelgym = "kernelgym";  // inside kVersions
inline constexpr const char* kVersionProtocol = "protocol";    // inside kVersions
inline constexpr const char* kEnv = "env";
inline constexpr const char* kEpisode = "episode";
inline constexpr const char* kTask = "task";
inline constexpr const char* kBackend = "backend";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kStep = "step";
inline constexpr const char* kObservation = "observation";
inline constexpr const char* kRunner = "runner";
inline constexpr const char* kTimingSamples = "timing_samples";
inline constexpr const char* kInfo = "info";  // the reply's info map (seed, runner, outcome, attempts, ...)

// Transitions only.
inline constexpr const char* kAction = "action";
inline constexpr const char* kPrompt = "prompt";
inline constexpr const char* kReward = "reward";
inline constexpr const char* kTerminated = "terminated";
inline constexpr const char* kTruncated = "truncated";
inline constexpr const char* kMeta = "meta";  // optional

// Inside kMeta, as the LLM policies write it (policies/agent): the chat exchanges behind a step.
namespace meta {
inline constexpr const char* kExchanges = "exchanges";
inline constexpr const char* kRole = "role";          // planner, implementer, debugger, ...
inline constexpr const char* kMessages = "messages";  // [{role, content}] as sent
inline constexpr const char* kCompletion = "completion";
inline constexpr const char* kStatus = "status";      // the chat call's status ("ok", "truncated", ...)
inline constexpr const char* kReasoning = "reasoning";  // the model's thinking, however the server delivered it
// false: the exchange led to no step (an ask that got no usable reply, a repeated kernel refused
// before evaluation). It rides with a later step but must not be credited with that step's reward.
inline constexpr const char* kProducedStep = "produced_step";
}  // namespace meta

// Inside kObservation (the protocol's Observation wire names).
namespace obs {
inline constexpr const char* kStep = "step";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kStage = "stage";
inline constexpr const char* kMessage = "message";
inline constexpr const char* kActionError = "action_error";
inline constexpr const char* kReused = "reused";
inline constexpr const char* kSpeedup = "speedup";
inline constexpr const char* kSpeedupCiLow = "speedup_ci_low";
inline constexpr const char* kSpeedupCiHigh = "speedup_ci_high";
inline constexpr const char* kBestSpeedup = "best_speedup";
inline constexpr const char* kStepsLeft = "steps_left";
inline constexpr const char* kSecondsLeft = "seconds_left";
inline constexpr const char* kSource = "source";
inline constexpr const char* kReport = "report";
inline constexpr const char* kText = "text";
inline constexpr const char* kFeatures = "features";
// Inside kReport: the evaluation's wall-clock seconds (docs/results.md).
inline constexpr const char* kReportSeconds = "seconds";
// The status of a correct, timed evaluation.
inline constexpr const char* kStatusOk = "ok";
}  // namespace obs

// Inside kAction.
namespace action {
inline constexpr const char* kKind = "kind";
inline constexpr const char* kReplace = "replace";  // field kSource
inline constexpr const char* kEdit = "edit";        // field kEdits: [{kSearch, kReplaceText}]
inline constexpr const char* kPatch = "patch";      // field kDiff
inline constexpr const char* kKnobs = "knobs";      // field kValues
inline constexpr const char* kRevert = "revert";    // field kToStep
inline constexpr const char* kSubmit = "submit";
inline constexpr const char* kSource = "source";
inline constexpr const char* kEdits = "edits";
inline constexpr const char* kSearch = "search";
inline constexpr const char* kReplaceText = "replace";
inline constexpr const char* kDiff = "diff";
inline constexpr const char* kValues = "values";
inline constexpr const char* kToStep = "to_step";
}  // namespace action

}  // namespace kernelgym::record
