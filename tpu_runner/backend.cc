#include "tpu_runner/backend.h"

#include "tpu_runner/cpu_backend.h"
#include "tpu_runner/pallas_backend.h"

namespace kernelgym {

BackendRegistry& BackendRegistry::Global() {
  static BackendRegistry registry;
  return registry;
}

void BackendRegistry::Register(const std::string& name, BackendFactory factory) {
  for (auto& [n, f] : factories_)
    if (n == name) {
      f = std::move(factory);
      return;
    }
  factories_.emplace_back(name, std::move(factory));
}

std::unique_ptr<Backend> BackendRegistry::Create(const std::string& name, const BackendConfig& config) const {
  for (const auto& [n, f] : factories_)
    if (n == name) return f(config);
  return nullptr;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, f] : factories_) names.push_back(n);
  return names;
}

void RegisterBuiltinBackends() {
  BackendRegistry::Global().Register("cpu", [](const BackendConfig& c) { return std::make_unique<CpuBackend>(c); });
  BackendRegistry::Global().Register(
      "pallas", [](const BackendConfig& c) { return std::make_unique<PallasBackend>(c, DefaultPallasSettings()); });
}

}  // namespace kernelgym
