// One pallas evaluation as the runner drives it, stage by stage. The stages match the judge's
// (kernelgym_pallas/evaluation.py) one to one:
//
//   runner (this file)          judge / tracer                              failure it can end with
//   StaticCheckStage            static check, then Specs                    rejected (static_check)
//   ReferenceAndTraceStage      reference (judge) while the tracer traces   internal_error, compile_error, crashed
//   AwaitJudgeResult            structure, compile, estimate, trials        timeout, crashed
//   StructureStage              the traced program refused                  rejected (compile)
//   CompileStage                the TPU compile                             compile_error (compile)
//   EstimateStage               the estimator's figures                     (none: facts only)
//   CorrectnessStage            the trials' outputs, compared HERE          incorrect, crashed
//   TimingStage                 the TPU's own clock (on a TPU host)         (none: facts only)
//   DecideVerdict               -                                           the status, and whether the estimate is paid
//
// Each stage is a function of the Evaluation that returns a Stop (an expected failure, as a
// value) or nothing (the next stage runs). Facts a stage learns go into `e.result` as it goes.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/process_cpu.h"
#include "core/result.h"
#include "datasets/task.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/pallas/candidate_compile_cache.h"
#include "tpu_runner/pallas/judge_protocol.h"
#include "tpu_runner/pallas/pallas_settings.h"

namespace kernelgym {

struct PallasWorker;

// Why an evaluation ends at a stage: its verdict. Whatever else the stage learned (stderr, the
// judge's diagnostics) is already in the result.
struct Stop {
  Status status = Status::kInternalError;
  Stage stage = Stage::kStaticCheck;
  std::string message;
};
using StageOutcome = std::optional<Stop>;  // nullopt: go on

// One expected output of the reference, read before the judge is given the candidate's program.
struct ExpectedOutput {
  TensorSpec spec;
  std::string bytes;
  std::vector<std::string> inputs_sha256;
};

// Everything one evaluation holds. Owned by the evaluating thread; nothing here is shared.
struct Evaluation {
  using Clock = std::chrono::steady_clock;
  Evaluation(const Task& t, const BackendVariant& v, const EvalOptions& o, const PallasSettings& s, EvalResult& r);
  ~Evaluation();  // where PallasWorker is complete
  const Task& task;
  const BackendVariant& variant;
  const EvalOptions& options;
  const PallasSettings& settings;
  EvalResult& result;

  std::unique_ptr<PallasWorker> judge, tracer;
  std::vector<uint64_t> seeds;
  judge::JudgeJob job;
  // CPU seconds (settings.wall_limit_factor times as many wall-clock seconds back each up).
  double call_timeout = 10, compile_timeout = 30, reference_timeout = 120;
  std::optional<CpuLimit> reference_limit;  // the judge's, from the job's sending to the reference's outputs

  judge::Specs specs;                                       // StaticCheckStage
  std::map<std::pair<int, int>, ExpectedOutput> expected;   // ReferenceAndTraceStage: (trial, output)
  std::string task_files_digest;                            // PrepareJob: the task's files as the judge got them
  std::optional<judge::ReferenceEstimate> reference_estimate;  // this job's, or the backend's cached one
  judge::Result judged;                                     // AwaitJudgeResult: the judge's last word
  // The candidate's compile by content (candidate_compile_cache.h): the backend's cache and this
  // evaluation's part of the key; AwaitJudgeResult answers the judge's CompileKey with them.
  CandidateCompileCache* compiles = nullptr;
  std::optional<CandidateCompileKey> compile_key;  // its program set when the judge sends its key
  bool compile_reused = false, compile_kept = false;
  bool program_ran = false;  // a trial began: facts the judge sends from then on are not kept
};

// Before the stages: the job folder's files (the candidate for both, the task for the judge only)
// and the job itself. The job asks for the reference's estimate when the evaluation wants
// estimates; UseReferenceEstimate then takes one computed before instead, when there is one.
[[nodiscard]] StageOutcome PrepareJob(Evaluation& e, const std::string& source);
void UseReferenceEstimate(Evaluation& e, std::optional<judge::ReferenceEstimate> cached);

[[nodiscard]] StageOutcome StaticCheckStage(Evaluation& e);
// The reference's estimate, when this job computed one, is left in e.reference_estimate for the
// backend to cache.
[[nodiscard]] StageOutcome ReferenceAndTraceStage(Evaluation& e);
[[nodiscard]] StageOutcome AwaitJudgeResult(Evaluation& e);
[[nodiscard]] StageOutcome StructureStage(Evaluation& e);
[[nodiscard]] StageOutcome CompileStage(Evaluation& e);
[[nodiscard]] StageOutcome EstimateStage(Evaluation& e);
[[nodiscard]] StageOutcome CorrectnessStage(Evaluation& e);
[[nodiscard]] StageOutcome TimingStage(Evaluation& e);

// The most memory the worker's sandbox held while it was watched, as a line of the result's
// details (nothing for a null worker or one without a watch).
void RecordResidentPeak(const PallasWorker* worker, EvalResult& r);

// Waits for a process's Ready message; a Stop when it never comes.
[[nodiscard]] StageOutcome AwaitReady(PallasWorker& worker, double timeout_s, EvalResult& r);

}  // namespace kernelgym
