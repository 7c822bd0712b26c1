// The candidate's full-size deviceless TPU compile and its estimate, kept by the program's content
// and reused when the same program comes again (an RL policy resubmits the same kernel often). The
// compile and the estimate are a function of the program and of what the reference's estimate is
// a function of (ReferenceEstimateKey: the judge's code, the packages, the target, the task's
// files); nothing else of the evaluation is reused: the structure checks, the proof that the
// full-size program is the checked one, the coverage of its outputs, the correctness runs and
// the verdict run on every evaluation.
//
// The program's part of the key is computed by the judge (kernelgym_pallas/program_key.py: the
// program written canonically, every literal, parameter, index map, dtype and constant byte),
// never by the tracer, whose process ran the candidate. What is kept is what the judge said after
// the compile and the estimate and before any of the candidate's program ran (CompileFacts).
// An entry is found only when its recorded material equals the asked one byte for byte.
//
// Where it lives: as ReferenceEstimateCache (in memory; on disk under <cache>/pallas/
// candidate-compiles only where every job runs in bubblewrap).
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "tpu_runner/pallas/judge_protocol.h"
#include "tpu_runner/pallas/reference_estimate_cache.h"

namespace kernelgym {

struct CandidateCompileKey {
  ReferenceEstimateKey evaluation;  // judge code, packages, target, task files
  std::string program;              // the judge's CompileKey: 64 lowercase hex digits
  std::string Material() const;
};

// The judge's key as it must read: SHA-256 in hex. Anything else is refused.
bool IsProgramKey(const std::string& key);

class CandidateCompileCache {
 public:
  explicit CandidateCompileCache(std::filesystem::path dir);  // empty: in memory only

  std::optional<judge::CompileFacts> Find(const CandidateCompileKey& key);
  // Kept only with the compile's facts present.
  void Store(const CandidateCompileKey& key, const judge::CompileFacts& facts);

  const std::filesystem::path& dir() const { return dir_; }
  static std::string FileName(const CandidateCompileKey& key);

 private:
  std::filesystem::path dir_;
  std::mutex mutex_;
  std::map<std::string, judge::CompileFacts> memory_;  // by material; guarded by mutex_
};

}  // namespace kernelgym
