// One interface per runner backend; backends are looked up by name in a registry.
// See docs/adding_a_backend.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "datasets/task.h"
#include "tpu_runner/timing_options.h"

namespace kernelgym {

struct EvalOptions {
  std::vector<uint64_t> seeds;        // correctness seeds; empty: the runner draws fresh ones
  uint64_t timing_seed = 0;           // 0: drawn
  TimingOptions timing;
  bool run_timing = true;
  double call_timeout_seconds = 10;   // one kernel call, wall clock
  std::size_t memory_bytes = std::size_t{8} << 30;  // harness address space (libtorch needs ~1 GiB)
  // Backends that can estimate what they cannot measure (pallas without a TPU: XLA's cost model
  // for the reference, compiled at full size) do so; off spares that compile (tests).
  bool estimates = true;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Evaluates one candidate source. Never throws for anything the candidate does: every
  // outcome is an EvalResult.
  virtual EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) = 0;
};

struct BackendConfig {
  std::string cache_dir;    // compile cache, measured peaks, the host's timing lock: runners on one
                            // host share it (that is what makes the timing lock host-wide)
  std::string tools_dir;    // where kernelgym-harness and kernelgym-peaks live
  // Start the next harness (loading libtorch takes ~0.45 s) while the caller does something
  // else between evaluations. Off for one-shot use (the CLI), where it would be wasted.
  bool prestart_harness = true;
  // cpu: fork each evaluation's judge and reference from a zygote that loaded libtorch once
  // (harness_zygote.h) instead of starting a reference that loads it again. Off for one-shot use
  // (the CLI), where the zygote would load libtorch for a single fork.
  bool reference_zygote = true;
  // cpu, one-shot use (the CLI): start the evaluation's harness before the compile instead of
  // after it, so that its reference loads libtorch (~0.5 CPU-s) on one core while g++ compiles on
  // another. Wasted when the compile fails; moot with a zygote or a pre-started harness.
  bool start_harness_before_compile = false;
  // Called on the evaluating thread, while the host's timing lock is still held, with the window
  // in which this backend held it (see CpuBackend). For tests and diagnostics; empty: not called.
  std::function<void(std::chrono::steady_clock::time_point locked, std::chrono::steady_clock::time_point released)>
      on_timing_window;
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendConfig&)>;

class BackendRegistry {
 public:
  static BackendRegistry& Global();
  void Register(const std::string& name, BackendFactory factory);
  // The backend comes wrapped so that every result it returns has valid UTF-8 text
  // (MakeResultTextValid, core/text_safety.h). nullptr for an unknown name.
  std::unique_ptr<Backend> Create(const std::string& name, const BackendConfig& config) const;
  std::vector<std::string> Names() const;

 private:
  std::vector<std::pair<std::string, BackendFactory>> factories_;
};

// Registers the backends built into this binary (explicit, so static linking keeps them).
void RegisterBuiltinBackends();

}  // namespace kernelgym
