// The wire between the runner (trusted, small, no libtorch) and the harness, the judge of one
// evaluation (trusted, small, no libtorch either: it runs the reference and the candidate in
// processes of their own, docs/sandbox.md). Frames over two pipes:
// [u32 kind][u32 meta_len][u64 data_len][meta][data], meta a JSON object, data raw bytes
// (tensors). This is a process edge, so serialization lives here and nowhere else.
//
// Integrity: no candidate code runs in the harness or can reach its descriptors, so every frame
// here comes from trusted code. The candidate's outputs in kTrialOutput were read by the
// harness from the candidate's shared memory; the runner compares them with kExpected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/task.h"
#include "tpu_runner/timing_options.h"

namespace kernelgym {

enum class FrameKind : uint32_t {
  kJob = 1,          // runner -> harness: HarnessJob
  kExpected = 2,     // reference output of a correctness trial {trial, output} (trials are numbered
                     // across the shape sets, in the job's order)
  kTrustedDone = 3,  // expected outputs sent, candidate loaded {reference_alone_ns, protections, call_limit_seconds}
  kEvent = 4,        // progress {phase, trial?, shape_set?}: the runner's watchdog keys its deadlines on these
  kTrialOutput = 5,  // candidate output {trial, output, call}
  kAfterReturn = 6,  // {changed, idle_cpu_ns}: did the output change, or the candidate's process run, after kernel() returned?
  kProceed = 7,      // runner -> harness: correctness passed, go on to timing
  kTiming = 8,       // {samples, mismatch?, converged}
  kCounters = 9,     // {counters, unavailable}
  kViolation = 10,   // {kind, message, value}: how the candidate's process failed (a fault, a forbidden
                     // system call, a time limit), then the harness exits
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

// One assignment of the task's sizes and the correctness trials run on it. The first shape set
// of a job is the timed one.
struct ShapeSetJob {
  std::vector<SizeParam> sizes;
  std::vector<TensorSpec> inputs, outputs;  // resolved against `sizes`
  std::vector<uint64_t> seeds;              // one per correctness trial on these shapes
};

struct HarnessJob {
  std::vector<ShapeSetJob> shape_sets;  // [0]: the timed sizes; then the other checked sizes
  int threads = 1;
  std::string reference_source;
  uint64_t timing_seed = 0;
  TimingOptions timing;
  bool run_timing = true;
  std::string kernel_path;       // the candidate .so, as seen inside the sandbox
  std::vector<std::string> libraries;  // the runtime libraries a kernel may link (the task's policy)
  uint32_t sandbox_uid = 0;      // the candidate's uid; 0: do not change it
  // Applied by the harness as soon as it reads the job: a pre-started harness was spawned
  // before the task (and its CPUs and limits) were known.
  std::vector<int> cpus;
  double cpu_seconds = 0;        // the candidate process's CPU-time limit (a backstop)
  std::size_t address_space = 0;
  // The CPU time one call of the candidate may take: call_limit_factor times the reference's
  // time on the same shapes, at least min_call_seconds, at most max_call_seconds.
  double call_limit_factor = 100;
  double min_call_seconds = 1;
  double max_call_seconds = 60;

  int NumTrials() const;  // over every shape set
};

nlohmann::json TensorToJson(const TensorSpec& t);
TensorSpec TensorFromJson(const nlohmann::json& j);  // throws nlohmann::json::exception

nlohmann::json JobToJson(const HarnessJob& job);
HarnessJob JobFromJson(const nlohmann::json& j);  // throws nlohmann::json::exception on bad input

}  // namespace kernelgym
