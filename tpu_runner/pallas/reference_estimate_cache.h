// The reference's estimated TPU time, computed once per content and reused. The estimate compiles
// the task's reference at its full (TPU-scale) sizes, deviceless, and reads its schedule: seconds
// to minutes (a JAXBench GEMM, 8192x8192x28672: ~4 s of a 11 s evaluation). It depends on nothing
// a candidate writes, so each evaluation of the same task would compute the same figures again.
//
// What keys an entry is everything the figures are a function of, in full (`Material`): the
// judge's code (every file of kernelgym_pallas), the interpreter's packages (jax, jaxlib, libtpu by
// version), the target the judge opened, and every file of the task the judge was handed (the
// reference, its sizes and dtypes, task.json or the JAXBench case). A task whose reference or
// sizes change gets another key, whatever its id; an entry is found only when its recorded
// material equals the asked one byte for byte (not only its digest).
//
// Where it lives: in the runner's memory, and on disk under the runner's cache folder
// (<cache>/pallas/reference-estimates/<sha256>.json, written by the runner alone, beside and never
// inside a job folder). The judge and tracer run in sandboxes that bind only their own job folder
// writable, so no candidate can write an entry; without bubblewrap (KERNELGYM_SANDBOX=none) a
// candidate runs as this user with this user's files, and the cache stays in memory only.
// Only estimates without an error are kept: a failure may be transient (a timeout, memory).
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "tpu_runner/pallas/judge_protocol.h"

namespace kernelgym {

// What a reference estimate is a function of; `Material` spells it out, one fact a line.
struct ReferenceEstimateKey {
  std::string judge_code;     // digest of the kernelgym_pallas package's files
  std::string packages;       // the interpreter's installed distributions, name-version, sorted
  std::string target, device_kind, jax;
  bool on_tpu = false;
  std::string task_id, layout, suite;
  std::string task_files;     // digest of the task's files as the judge was handed them
  std::string Material() const;
};

class ReferenceEstimateCache {
 public:
  // `dir` empty: in memory only.
  explicit ReferenceEstimateCache(std::filesystem::path dir);

  std::optional<judge::ReferenceEstimate> Find(const ReferenceEstimateKey& key);
  // Kept only when the estimate has no error.
  void Store(const ReferenceEstimateKey& key, const judge::ReferenceEstimate& estimate);

  const std::filesystem::path& dir() const { return dir_; }
  // The entry's file name for a key (its material's SHA-256).
  static std::string FileName(const ReferenceEstimateKey& key);

 private:
  std::filesystem::path dir_;
  std::mutex mutex_;
  std::map<std::string, judge::ReferenceEstimate> memory_;  // by material; guarded by mutex_
};

// The judge's code and the interpreter's packages, for the key: computed once per backend.
std::string JudgeCodeDigest(const std::filesystem::path& package_dir);
std::string InstalledPackages(const std::filesystem::path& python);

}  // namespace kernelgym
