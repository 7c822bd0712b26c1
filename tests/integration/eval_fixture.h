// Shared set-up for the end-to-end runner tests: the real task registry and the real cpu
// backend (compiler, sandbox, harness), with short budgets so the suite stays fast.
#pragma once

#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>

#include "datasets/suite.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/runner_config.h"

namespace kernelgym::testing {

inline const TaskRegistry& Tasks() {
  static const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  return registry;
}

inline Backend& Cpu() {
  static std::unique_ptr<Backend> backend = [] {
    RegisterBuiltinBackends();
    BackendConfig config = DefaultBackendConfig();
    // Most test processes run one evaluation: a harness pre-started after it would only cost
    // a libtorch start-up on a core the other test job needs.
    config.prestart_harness = false;
    return BackendRegistry::Global().Create("cpu", config);
  }();
  return *backend;
}

inline EvalOptions FastOptions() {
  EvalOptions options;
  options.timing.budget_seconds = 0.4;
  options.call_timeout_seconds = 3;
  return options;
}

inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::filesystem::path SourceDir() { return KERNELGYM_SOURCE_DIR; }

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The whole verdict text an expected reason may be found in: message, details, diagnostics.
inline std::string VerdictText(const EvalResult& r) {
  std::string text = r.message;
  for (const auto& d : r.details) text += "\n" + d;
  for (const auto& d : r.diagnostics) text += "\n" + std::to_string(d.line) + ": " + d.message;
  return text;
}

// A folder of this test process's own under the system temp folder, created on first use and
// removed when the test binary exits.
inline const std::filesystem::path& TestTempDir() {
  static const struct Folder {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("kernelgym-test-" + std::to_string(getpid()));
    Folder() { std::filesystem::create_directories(path); }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } folder;
  return folder.path;
}

}  // namespace kernelgym::testing
