// The template to copy for a new backend (docs/adding_a_backend.md): the smallest Backend that
// keeps the contract, in the way envpool's dummy env is the smallest env. It judges nothing:
// every kernel "passes" at speedup 1, so it serves to measure a server and its runners without a
// compiler, and as the starting point of a real backend. The server's own `null` (answered in
// the server, no runner: core/backend_info.h, evaluated_by_server) gives the same result.
#pragma once

#include "tpu_runner/backend.h"

namespace kernelgym {

class NullBackend final : public Backend {
 public:
  // A real backend keeps what it needs across evaluations here: the config (its cache folder,
  // where its tools are), pre-started workers, a compile cache.
  explicit NullBackend(BackendConfig config) : config_(std::move(config)) {}

  // The registry's name, and its descriptor's (KnownBackends in core/backend_info.cc).
  std::string name() const override { return "null"; }

  // The contract: never throw for anything the candidate does; every outcome is an EvalResult
  // naming the task and the backend, the stage reached, a status and a one-line message. A real
  // backend runs its stages here (static checks, compile, correctness against the reference,
  // timing against it in the same window, profile) and returns at the first that fails.
  EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) override;

 private:
  BackendConfig config_;
};

}  // namespace kernelgym
