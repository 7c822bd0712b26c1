// Stage 2: compile a candidate into a shared object, inside the sandbox, through a
// content-addressed cache.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "tpu_runner/result.h"

namespace kernelgym {

struct CompilerConfig {
  std::string cxx = "/usr/bin/g++";
  std::filesystem::path cache_dir;  // <cache>/compile/<sha256>/
  double wall_seconds = 30;
  double cpu_seconds = 30;
  std::size_t memory_bytes = std::size_t{4} << 30;
};

struct CompileResult {
  Status status = Status::kInternalError;  // kOk, kCompileError, kRejected or kInternalError
  std::string message;
  std::vector<Diagnostic> diagnostics;
  std::vector<Remark> remarks;
  std::vector<std::string> details;
  std::filesystem::path shared_object;  // valid when status == kOk
  bool cached = false;
  double seconds = 0;
};

// Thread-safe: concurrent compiles of the same source race benignly (the cache entry is
// published with an atomic rename).
class Compiler {
 public:
  explicit Compiler(CompilerConfig config);

  [[nodiscard]] CompileResult Compile(const std::string& source, const Task& task) const;

  // What the cache key covers besides source and flags: compiler version and the CPU
  // (-march=native makes the object CPU-specific).
  const std::string& identity() const { return identity_; }

  // The header force-included before the candidate: declares `kernel` with the task's
  // signature (a mismatch is a compile error) and default visibility.
  static std::string Prelude(const Task& task);

 private:
  CompileResult CompileUncached(const std::string& source, const Task& task, const std::filesystem::path& entry) const;
  CompilerConfig config_;
  std::string identity_;
};

}  // namespace kernelgym
