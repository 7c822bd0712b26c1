// The one file that names the built-in backends, each in its own folder (adding one:
// docs/adding_a_backend.md).
#include "tpu_runner/backend.h"
#include "tpu_runner/cpu/cpu_backend.h"
#include "tpu_runner/null/null_backend.h"
#include "tpu_runner/pallas/pallas_backend.h"

namespace kernelgym {

void RegisterBuiltinBackends() {
  BackendRegistry::Global().Register("cpu", [](const BackendConfig& c) { return std::make_unique<CpuBackend>(c); });
  BackendRegistry::Global().Register(
      "pallas", [](const BackendConfig& c) { return std::make_unique<PallasBackend>(c, DefaultPallasSettings()); });
  BackendRegistry::Global().Register("null", [](const BackendConfig& c) { return std::make_unique<NullBackend>(c); });
}

}  // namespace kernelgym
