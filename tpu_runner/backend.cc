#include "tpu_runner/backend.h"

#include "core/text_safety.h"

namespace kernelgym {
namespace {

// Every backend the registry creates is wrapped in this: whatever bytes a candidate put into
// its result (its process's output, its diagnostics, its names), the result leaves the backend
// with valid UTF-8 text, for every consumer at once (JSON, msgpack, the text report, the
// trajectory store). The one edge where process output becomes result text, whatever backend.
class TextSafeBackend final : public Backend {
 public:
  explicit TextSafeBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  EvalResult Evaluate(const Task& task, const std::string& source, const EvalOptions& options) override {
    EvalResult result = inner_->Evaluate(task, source, options);
    MakeResultTextValid(result);
    return result;
  }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace

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
    if (n == name) {
      std::unique_ptr<Backend> backend = f(config);
      return backend ? std::make_unique<TextSafeBackend>(std::move(backend)) : nullptr;
    }
  return nullptr;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, f] : factories_) names.push_back(n);
  return names;
}

}  // namespace kernelgym
