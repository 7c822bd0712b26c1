// One run of kernelgym-harness, seen from the runner: spawn it in the sandbox, feed it the job,
// judge the correctness trials from the frames it sends (against the expected outputs it sent
// before any candidate code was loaded), watch its deadlines, and say what happened.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/result.h"

namespace kernelgym {

struct HarnessRun {
  Status status = Status::kInternalError;  // kOk when correctness passed (and timing, if run, finished)
  Stage stage = Stage::kCorrectness;
  std::string message;
  std::vector<std::string> details;
  CorrectnessReport correctness;
  std::vector<TimingSample> samples;
  bool timing_converged = false;
  double timing_seconds = 0;
  double reference_alone_ns = 0;
  std::map<std::string, double> counters;
  std::vector<std::string> unavailable_counters;
  std::map<std::string, bool> protections;
  double correctness_seconds = 0;
};

struct HarnessPaths {
  std::filesystem::path harness_program;
  std::filesystem::path shared_object;
};

HarnessRun RunHarnessSession(const Task& task, const HarnessPaths& paths, const EvalOptions& options);

}  // namespace kernelgym
