// The `pallas` backend: JAX Pallas kernels for TPU. The runner side of it, in C++: it uses two
// Python processes per evaluation in the sandbox, the tracer (tpu_runner/pallas/kernelgym_pallas/
// tracer.py: imports and traces the candidate, holds no task data) and the judge (judge.py: never
// imports candidate code; holds the task, runs the reference, then checks, compiles and runs the
// program the tracer traced). It reads the reference's outputs before the judge is given that
// program, compares the candidate's outputs itself (CompareOutput, the same rule as the cpu
// backend) and turns the events into an EvalResult. docs/pallas.md describes the whole path.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tpu_runner/backend.h"

namespace kernelgym {

struct PallasSettings {
  std::filesystem::path python;       // the venv's interpreter (scripts/pallas_venv.sh makes it)
  std::filesystem::path package_dir;  // the folder holding kernelgym_pallas/
  std::string target = "v5e";         // TPU generation to compile for without a TPU: v5e, v6e
  double start_timeout_s = 120;       // a process's import of jax and the target's opening
  // The judge's static check of the source (a first filter). Tests turn it off to show that no
  // verdict rests on it.
  bool static_check = true;
  // Each job's judge and tracer forked by a fork server that imported jax once (inside
  // bubblewrap's namespaces only); off: a process started per job. The benchmark compares both.
  bool fork_server = true;
};

// Where the judge's and the tracer's interpreter is: $KERNELGYM_PALLAS_PYTHON, else the build's
// pallas-venv; the package from the source tree; the target from $KERNELGYM_PALLAS_TARGET;
// KERNELGYM_PALLAS_FORK_SERVER=0 starts a process per job instead of forking.
PallasSettings DefaultPallasSettings();

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

  BackendConfig config_;
  PallasSettings settings_;
  std::unique_ptr<PallasWorkerPool> judges_, tracers_;
  std::mutex estimates_mutex_;
  std::map<std::string, std::map<std::string, double>> estimates_;  // by task id; guarded by estimates_mutex_
};

}  // namespace kernelgym
