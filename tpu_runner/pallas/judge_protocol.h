// The protocol between the runner and its two Python processes (the judge and the tracer) and their
// fork servers (ForkJob, JobEnded), the
// mirror of tpu_runner/pallas/kernelgym_pallas/protocol.py: every message once, with its fields
// and their types. On the wire, one JSON object per line: {"v": kJudgeProtocolVersion, "kind":
// KIND, <fields>}. JSON lives here (Encode/Decode) and nowhere else of the backend.
//
// Decoding is strict: another version, an unknown kind, a missing field, a field of another type
// or a field the version does not define is refused with an error naming it. A tracer's message
// is the candidate's to write (its code runs there), so strictness is also what keeps a made-up
// message from being half-read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kernelgym::judge {

inline constexpr int kJudgeProtocolVersion = 1;

struct InputSpec {
  std::vector<int64_t> shape;
  std::string dtype;
  bool operator==(const InputSpec&) const = default;
};
using SizeSets = std::map<std::string, std::vector<InputSpec>>;

struct Diagnostic {
  std::string file;
  int64_t line = 0, column = 0;
  std::string severity, message;
  bool operator==(const Diagnostic&) const = default;
};

// judge/tracer -> runner: the process is up.
struct Ready {
  std::string role;  // "judge" or "tracer"
  std::string jax;
  double start_seconds = 0;
  std::string target;  // the judge's TPU generation; "" for the tracer
  bool on_tpu = false;
  std::string device_kind;
  int64_t fork_server_job = 0;  // 0: a process started for this evaluation
  double fork_server_start_seconds = 0;
  bool operator==(const Ready&) const = default;
};

// runner -> judge: one evaluation.
struct JudgeJob {
  std::string task_dir, layout, suite, out_dir, candidate_path;
  std::vector<int64_t> seeds;  // each < 2^53 (exact in a JSON double)
  bool static_check = true;
  bool run_timing = true;
  int64_t timing_seed = 0;
  bool estimate_reference = true;  // compile the reference at full size for its estimated time
  bool estimate_candidate = true;
  bool operator==(const JudgeJob&) const = default;
};

// runner -> tracer.
struct TraceJob {
  std::string candidate_path;
  SizeSets size_sets;
  std::string artifact_path;
  bool operator==(const TraceJob&) const = default;
};

// judge -> runner: the inputs' shapes per size set, for the tracer.
struct Specs {
  SizeSets size_sets;
  bool operator==(const Specs&) const = default;
};

struct ExpectedOutput {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string file;
  double atol = 0, rtol = 0;
  bool operator==(const ExpectedOutput&) const = default;
};

struct ReferenceTrial {
  int64_t seed = 0;
  std::string size_set;
  std::vector<std::string> inputs_sha256;
  std::vector<ExpectedOutput> outputs;
  bool operator==(const ReferenceTrial&) const = default;
};

// The reference's estimated device time on the target: an estimate, never a measurement.
struct ReferenceEstimate {
  double estimated_us = 0;  // 0: none
  double xla_model_us = 0;
  bool trusted = false;     // the estimator's view of this figure
  double flops = 0, bytes_accessed = 0;
  std::string error;        // why there is none
  bool operator==(const ReferenceEstimate&) const = default;
};

// judge -> runner: the expected outputs are written.
struct Reference {
  std::vector<ReferenceTrial> trials;
  std::optional<ReferenceEstimate> estimate;  // none when the job did not ask
  bool operator==(const Reference&) const = default;
};

// runner -> judge: the tracer's program, copied into the judge's folder.
struct Artifact {
  std::string file;
  bool operator==(const Artifact&) const = default;
};

// tracer -> runner: the traced programs are written.
struct Traced {
  std::string file;
  int64_t bytes = 0;
  std::map<std::string, double> stage_seconds;
  bool operator==(const Traced&) const = default;
};

// judge -> runner: a stage began ("compiled": the compile is done; "trial": a run starts;
// "full_size_sample": the full-size program's sampled run starts).
struct Progress {
  std::string stage;
  int64_t trial = -1, repeat = 0;
  bool operator==(const Progress&) const = default;
};

struct OutputFile {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string file;
  bool operator==(const OutputFile&) const = default;
};

struct CandidateRun {
  int64_t trial = 0, repeat = 0;
  std::vector<OutputFile> outputs;
  std::vector<std::string> inputs_sha256;
  bool operator==(const CandidateRun&) const = default;
};

struct TimingSample {
  double reference_ns = 0, candidate_ns = 0;
  bool operator==(const TimingSample&) const = default;
};

struct Timing {
  bool representative = false;
  std::string clock;  // "tpu_device" or "none"
  std::string reason;
  std::vector<TimingSample> samples;
  double seconds = 0;
  std::map<std::string, double> profile;
  bool operator==(const Timing&) const = default;
};

struct TpuCompile {
  std::string target, device_kind;
  bool deviceless = true;
  double seconds = 0;
  std::map<std::string, double> memory;
  bool operator==(const TpuCompile&) const = default;
};

struct KernelProfile {
  std::string kernel;
  double grid_steps = 0, bundles_per_step = 0, estimated_cycles = 0, critical_path_cycles = 0;
  std::map<std::string, double> unit_share;
  bool operator==(const KernelProfile&) const = default;
};

// The estimator's figures for the candidate's compiled program. Whether a speedup built on them
// is trusted (and paid) is the runner's verdict (pallas_verdict.h), not the judge's.
struct CandidateEstimate {
  double estimated_us = 0;  // 0: none
  double mosaic_cycles = 0, xla_us = 0;
  bool trusted = false;     // the estimator's own view
  std::vector<std::string> reasons;
  std::string method;
  std::vector<KernelProfile> kernels;
  bool operator==(const CandidateEstimate&) const = default;
};

// judge -> runner, before the full-size compile: the program's canonical key
// (kernelgym_pallas/program_key.py). The runner answers with CompileFacts.
struct CompileKey {
  std::string program;  // SHA-256 (hex) of the program written canonically, with the judge's context
  bool operator==(const CompileKey&) const = default;
};

// runner -> judge: an earlier compile's facts for that key (both empty: compile here). judge ->
// runner, after a compile it did for a key it sent: the facts to keep (candidate_compile_cache.h),
// sent before any of the candidate's program runs.
struct CompileFacts {
  std::optional<TpuCompile> tpu_compile;
  std::optional<CandidateEstimate> estimate;  // as the estimator gave it, before the judge's own caveats
  bool operator==(const CompileFacts&) const = default;
};

// judge or tracer -> runner: the end of its part.
struct Result {
  std::string status;  // ok, rejected, compile_error, incorrect, crashed, internal_error
  std::string stage;
  std::string message;
  std::vector<Diagnostic> diagnostics;
  std::vector<std::string> details;
  std::map<std::string, double> stage_seconds;
  std::vector<CandidateRun> trials;
  std::optional<Timing> timing;
  std::optional<TpuCompile> tpu_compile;
  std::optional<CandidateEstimate> estimate;
  int64_t pallas_calls = 0;
  bool operator==(const Result&) const = default;
};

// either -> runner: the process could not start.
struct Fatal {
  std::string message;
  bool operator==(const Fatal&) const = default;
};

// runner -> fork server (forkserver.py): fork the next job's process. Sent in one sendmsg with
// the job's descriptors attached (control socket, report pipe, stderr pipe).
struct ForkJob {
  int64_t descriptors = 3;
  bool operator==(const ForkJob&) const = default;
};

// fork server -> runner: the job's process ended and /tmp was emptied (clean false: something
// stayed, and the server exits rather than fork again).
struct JobEnded {
  int64_t job = 0;         // the server's count, from 1
  int64_t exit_code = -1;  // -1 when a signal ended it
  int64_t signal = 0;      // 0 when it exited
  bool clean = false;
  bool operator==(const JobEnded&) const = default;
};

using Message = std::variant<Ready, JudgeJob, TraceJob, Specs, Reference, Artifact, Traced, Progress, CompileKey,
                             CompileFacts, Result, Fatal, ForkJob, JobEnded>;

// The message's kind on the wire: "ready", "job", ...
std::string KindOf(const Message& message);

// One line of JSON (without the newline).
std::string Encode(const Message& message);
nlohmann::json ToJson(const Message& message);

// A message from one line (or an already parsed object); nullopt with `error` naming what is wrong.
std::optional<Message> Decode(const std::string& line, std::string& error);
std::optional<Message> Decode(const nlohmann::json& object, std::string& error);

}  // namespace kernelgym::judge
