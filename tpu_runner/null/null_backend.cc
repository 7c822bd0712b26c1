#include "tpu_runner/null/null_backend.h"

namespace kernelgym {

EvalResult NullBackend::Evaluate(const Task& task, const std::string& /*source*/, const EvalOptions& /*options*/) {
  // Nothing is compiled or run: the fixed result of core/result.h. A real backend fills
  // stage_seconds, correctness, timing (with raw samples), profile and protections as it goes.
  return NullBackendResult(task.id);
}

}  // namespace kernelgym
