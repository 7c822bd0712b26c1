// Stage 2: compile a candidate into a shared object, inside the sandbox, through a
// content-addressed cache.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "datasets/task.h"

namespace kernelgym {

struct CompilerConfig {
  std::string cxx = "/usr/bin/g++";
  std::filesystem::path cache_dir;  // <cache>/compile/<sha256>/, <cache>/pch/<sha256>/
  bool precompiled_headers = true;  // precompile the default allowed headers once per flag set
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

  // The header every compile force-includes when precompiled headers are on: the commonly used
  // allowed headers. Parsing <immintrin.h> and <cmath> alone costs ~400 ms per compile; the
  // precompiled form loads in a fraction of that. (A side effect: these headers are visible even
  // when a kernel forgets to include them.)
  static std::string PrecompiledHeaderSource();

 private:
  CompileResult CompileUncached(const std::string& source, const Task& task, const std::filesystem::path& entry) const;
  // The folder holding kernelgym_pch.h and its .gch for these flags, built on first use;
  // empty when precompiled headers are off or the build failed (compiles then parse headers).
  std::filesystem::path EnsurePrecompiledHeader(const std::vector<std::string>& flags) const;
  std::vector<std::string> BaseFlags(const Task& task) const;

  CompilerConfig config_;
  std::string identity_;
  mutable std::mutex pch_mutex_;
  mutable std::map<std::string, std::filesystem::path> pch_dirs_;  // by flags key; guarded by pch_mutex_
};

}  // namespace kernelgym
