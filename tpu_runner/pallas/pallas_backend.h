// The `pallas` backend: JAX Pallas kernels for TPU. The runner side of it, in C++: it uses two
// Python processes per evaluation in the sandbox, the tracer (tpu_runner/pallas/kernelgym_pallas/
// tracer.py: imports and traces the candidate, holds no task data) and the judge (judge.py: never
// imports candidate code; holds the task, runs the reference, then checks, compiles and runs the
// program the tracer traced). It reads the reference's outputs before the judge is given that
// program, compares the candidate's outputs itself (CompareOutput, the same rule as the cpu
// backend) and turns the judge's messages into an EvalResult. The evaluation runs as stages that
// match the judge's (pallas_stages.h); the verdict, and whether an estimate is paid, is decided
// once, in pallas_verdict.h. docs/pallas.md describes the whole path.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tpu_runner/backend.h"
#include "tpu_runner/pallas/candidate_compile_cache.h"
#include "tpu_runner/pallas/judge_protocol.h"
#include "tpu_runner/pallas/pallas_settings.h"
#include "tpu_runner/pallas/pallas_stages.h"
#include "tpu_runner/pallas/reference_estimate_cache.h"

namespace kernelgym {

struct PallasWorker;
class PallasWorkerPool;

// Every evaluation gets a fresh judge and a fresh tracer (nothing a candidate leaves in an
// interpreter or a folder reaches the next evaluation): each is forked for its job by a fork
// server that imported jax once (pallas_worker.h), so jax's import stays out of the evaluation.
class PallasBackend : public Backend {
 public:
  PallasBackend(const BackendConfig& config, PallasSettings settings);
  ~PallasBackend() override;
  std::string name() const override { return "pallas"; }
  EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) override;

  // The two processes of an evaluation (see the file's comment).
  enum class Role { kJudge, kTracer };

 private:
  std::unique_ptr<PallasWorker> TakeWorker(Role role, std::string& error);
  void Prestart();
  // The stages in order (pallas_stages.h); the first Stop ends the evaluation.
  [[nodiscard]] StageOutcome RunStages(const Task& task, const std::string& source, const EvalOptions& options,
                                       EvalResult& r);
  // What the reference's estimate of this evaluation is a function of (reference_estimate_cache.h).
  ReferenceEstimateKey ReferenceKeyOf(const Evaluation& e) const;

  BackendConfig config_;
  PallasSettings settings_;
  std::unique_ptr<PallasWorkerPool> judges_, tracers_;
  // The reference's estimate by content: in memory, and on disk where the sandbox keeps every
  // candidate from the cache folder.
  std::string judge_code_, packages_;
  ReferenceEstimateCache reference_estimates_;
  // The candidate's full-size compile and estimate by the program's content, likewise.
  CandidateCompileCache candidate_compiles_;
};

}  // namespace kernelgym
