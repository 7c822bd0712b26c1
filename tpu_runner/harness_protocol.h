// The wire between the runner (trusted, small, no libtorch) and the harness (runs the reference
// and the candidate). Frames over two pipes: [u32 kind][u32 meta_len][u64 data_len][meta][data],
// meta a JSON object, data raw bytes (tensors). This is a process edge, so serialization lives
// here and nowhere else.
//
// Integrity: once the candidate is loaded, the harness writes frames with a raw write(2) whose
// 4th argument is a per-job cookie; the harness's seccomp filter lets writes to the report fd
// through only with that cookie and kills the process otherwise. A kernel cannot forge a frame
// without reading the cookie out of the harness's memory, and a wrong guess is fatal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/task.h"

namespace kernelgym {

enum class FrameKind : uint32_t {
  kJob = 1,          // runner -> harness: HarnessJob
  kExpected = 2,     // reference output of a correctness trial {trial, output}
  kTrustedDone = 3,  // reference done, candidate about to load {reference_alone_ns, protections}
  kEvent = 4,        // progress {phase, trial?}: the runner's watchdog keys its deadlines on these
  kTrialOutput = 5,  // candidate output {trial, output, call}
  kAfterReturn = 6,  // {changed}: did the output change after kernel() returned?
  kProceed = 7,      // runner -> harness: correctness passed, go on to timing
  kTiming = 8,       // {samples, mismatch?, converged}
  kCounters = 9,     // {counters, unavailable}
  kViolation = 10,   // {kind, message, ...}: written from signal handlers, then the harness exits
  kFatal = 11,       // {message}: the harness itself failed (task bug, environment)
  kDone = 12,
};

inline constexpr uint32_t kMaxMetaBytes = 16u << 20;
inline constexpr uint64_t kMaxDataBytes = uint64_t{4} << 30;

struct Frame {
  FrameKind kind = FrameKind::kEvent;
  nlohmann::json meta = nlohmann::json::object();
  std::string data;
};

std::string EncodeFrame(const Frame& frame);

// Incremental decoder: feed bytes, take complete frames.
class FrameDecoder {
 public:
  void Feed(const char* bytes, std::size_t size) { buffer_.append(bytes, size); }
  // A complete frame, or nullopt if more bytes are needed. Sets error() on a malformed stream.
  std::optional<Frame> Next();
  const std::string& error() const { return error_; }

 private:
  std::string buffer_;
  std::string error_;
};

// Blocking write of a whole buffer; false on error (EPIPE when the peer died — on a socket
// without raising SIGPIPE).
bool WriteAll(int fd, const std::string& bytes);

struct TimingOptions {
  double budget_seconds = 1.0;        // wall time for the timing loop (after warm-up)
  int min_rounds = 20;
  int max_rounds = 5000;
  double target_relative_ci = 0.03;   // stop when the 95% CI of the speedup is within +-3%
  int warmup_rounds = 3;
  bool refresh_inputs = true;         // re-randomize part of the inputs before every round
};

struct HarnessJob {
  std::vector<TensorSpec> inputs, outputs;
  std::vector<SizeParam> sizes;
  int threads = 1;
  std::string reference_source;
  std::vector<uint64_t> seeds;   // one per correctness trial
  uint64_t timing_seed = 0;
  TimingOptions timing;
  bool run_timing = true;
  std::string kernel_path;       // the candidate .so, as seen inside the sandbox
  uint32_t sandbox_uid = 0;      // 0: do not change uid
  uint64_t cookie = 0;
  // Applied by the harness as soon as it reads the job: a pre-started harness was spawned
  // before the task (and its CPUs and limits) were known.
  std::vector<int> cpus;
  double cpu_seconds = 0;
  std::size_t address_space = 0;
};

nlohmann::json JobToJson(const HarnessJob& job);
HarnessJob JobFromJson(const nlohmann::json& j);  // throws nlohmann::json::exception on bad input

}  // namespace kernelgym
