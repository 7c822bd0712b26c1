// The `pallas` backend: JAX Pallas kernels for TPU. The runner side of it, in C++: it starts the
// Python worker (tpu_runner/pallas/kernelgym_pallas/worker.py) in the sandbox, feeds it the job,
// reads the reference's outputs before the candidate is loaded, compares the candidate's outputs
// itself (CompareOutput, the same rule as the cpu backend) and turns the worker's events into an
// EvalResult. docs/pallas.md describes the whole path.
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
  double start_timeout_s = 120;       // the worker's import of jax and the target's opening
};

// Where the pallas worker and its interpreter are: $KERNELGYM_PALLAS_PYTHON, else the build's
// pallas-venv; the package from the source tree; the target from $KERNELGYM_PALLAS_TARGET.
PallasSettings DefaultPallasSettings();

struct PallasWorker;

// Every evaluation gets a fresh worker process (a candidate's module-level state, or a patch it
// got past the static check, cannot reach the next evaluation); the next one is started while
// the current one runs, so jax's import stays out of the evaluation's path.
class PallasBackend : public Backend {
 public:
  PallasBackend(const BackendConfig& config, PallasSettings settings);
  ~PallasBackend() override;
  std::string name() const override { return "pallas"; }
  EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) override;

 private:
  std::unique_ptr<PallasWorker> TakeWorker(std::string& error);
  void Prestart();

  BackendConfig config_;
  PallasSettings settings_;
  std::mutex spare_mutex_;
  std::unique_ptr<PallasWorker> spare_;  // guarded by spare_mutex_
  std::map<std::string, std::map<std::string, double>> estimates_;  // by task id; guarded by spare_mutex_
};

}  // namespace kernelgym
