#include "tpu_runner/pallas/pallas_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "core/subprocess.h"
#include "tpu_runner/correctness.h"
#include "tpu_runner/pallas/pallas_worker.h"
#include "tpu_runner/sandbox.h"
#include "tpu_runner/timing_stats.h"

namespace kernelgym {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::optional<std::string> ReadBinary(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// "12" or "2.5": a limit in seconds as a person writes it.
std::string Seconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::vector<int64_t> Shape(const json& j) { return j.get<std::vector<int64_t>>(); }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

namespace {

// What a process's death or silence means for the verdict.
void Died(PallasWorker& worker, EvalResult& r, Stage stage, const std::string& during) {
  worker.AwaitEnd(After(5));
  worker.DrainOutput();
  r.stage = stage;
  const std::string stderr_head = HeadLines(worker.stderr_text(), 12);
  const int signal = worker.signal();
  if (signal == SIGSYS) {
    r.status = Status::kSandboxViolation;
    r.message = "a forbidden system call (seccomp killed the " + worker.role + " with SIGSYS) " + during;
  } else if (signal != 0) {
    r.status = Status::kCrashed;
    r.message = "the " + worker.role + " was killed by " + SignalName(signal) + " " + during;
  } else {
    r.status = Status::kCrashed;
    r.message = "the " + worker.role + " exited (code " + std::to_string(worker.exit_code()) + ") " + during;
  }
  if (!stderr_head.empty()) r.details.push_back("stderr: " + stderr_head);
}

std::optional<Status> WorkerStatus(const std::string& name) {
  static const std::map<std::string, Status> kStatuses = {
      {"ok", Status::kOk},           {"rejected", Status::kRejected},         {"compile_error", Status::kCompileError},
      {"incorrect", Status::kIncorrect}, {"crashed", Status::kCrashed},       {"internal_error", Status::kInternalError}};
  auto it = kStatuses.find(name);
  return it == kStatuses.end() ? std::nullopt : std::optional(it->second);
}

struct Expected {
  TensorSpec spec;
  std::string bytes;
  std::vector<std::string> inputs_sha256;
};

// Judges the candidate's outputs against the expected ones: the verdict is made here, outside
// the process the candidate ran in.
void Judge(const json& result, const std::filesystem::path& job_dir, const std::map<std::pair<int, int>, Expected>& expected,
           const std::vector<uint64_t>& seeds, EvalResult& r) {
  CorrectnessReport report;
  report.seeds = seeds;
  std::map<int, OutputCheck> worst;  // per output index
  std::map<std::pair<int, int>, std::string> first_run;  // (trial, output) -> bytes of the first run
  std::set<int> arrived;  // trials whose first run came back with every output
  std::string failure;
  for (const json& run : result.value("trials", json::array())) {
    const int trial = run.value("trial", -1);
    const int repeat = run.value("repeat", 0);
    const json outputs = run.value("outputs", json::array());
    for (int k = 0; k < static_cast<int>(outputs.size()); ++k) {
      auto want = expected.find({trial, k});
      if (want == expected.end()) {
        failure = "the judge reported output " + std::to_string(k) + " of trial " + std::to_string(trial) +
                  " that the reference never produced";
        break;
      }
      const json& o = outputs[k];
      const std::optional<std::string> actual =
          ReadBinary(job_dir / std::filesystem::path(o.value("file", "")).filename());
      const std::vector<int64_t> shape = Shape(o.at("shape"));
      if (!actual) {
        failure = "output '" + want->second.spec.name + "' of trial " + std::to_string(trial) + " is missing";
        break;
      }
      if (shape != want->second.spec.shape || o.value("dtype", "") != DTypeName(want->second.spec.dtype)) {
        failure = "output '" + want->second.spec.name + "' is " + o.value("dtype", "?") + ShapeText(shape) +
                  "; the task's is " + std::string(DTypeName(want->second.spec.dtype)) +
                  ShapeText(want->second.spec.shape);
        break;
      }
      if (repeat > 0) {
        if (first_run[{trial, k}] != *actual) report.deterministic = false;
        continue;
      }
      first_run[{trial, k}] = *actual;
      OutputCheck check = CompareOutput(want->second.spec, Bytes(want->second.bytes), Bytes(*actual));
      if (!worst.count(k) || worst[k].passed()) worst[k] = check;
    }
    if (!failure.empty()) break;
    if (repeat == 0) {
      if (!expected.count({trial, static_cast<int>(outputs.size())})) arrived.insert(trial);
      report.trials_run = static_cast<int>(arrived.size());
      auto want = expected.find({trial, 0});
      if (want != expected.end() && run.value("inputs_sha256", json::array()) != json(want->second.inputs_sha256))
        failure = "the kernel changed its inputs (trial " + std::to_string(trial) + ")";
    }
    if (!failure.empty()) break;
  }
  // Every trial the reference ran must have come back: a missing one is a failure, not a pass.
  if (failure.empty())
    for (const auto& [key, want] : expected)
      if (!arrived.count(key.first)) {
        failure = "the outputs of trial " + std::to_string(key.first) + " did not arrive";
        break;
      }
  for (auto& [k, check] : worst) report.checks.push_back(check);
  r.correctness = report;
  r.stage = Stage::kCorrectness;
  if (!failure.empty()) {
    r.status = Status::kIncorrect;
    r.message = failure;
    return;
  }
  for (const OutputCheck& c : report.checks)
    if (!c.passed()) {
      r.status = Status::kIncorrect;
      r.message = "output '" + c.output + "': " + std::to_string(c.mismatches) + " of " + std::to_string(c.elements) +
                  " elements outside tolerance";
      return;
    }
  if (!report.deterministic) {
    r.status = Status::kIncorrect;
    r.message = "two runs on the same inputs gave different outputs";
    return;
  }
  if (report.trials_run < static_cast<int>(seeds.size())) {
    r.status = Status::kIncorrect;
    r.message = "the judge reported " + std::to_string(report.trials_run) + " of " + std::to_string(seeds.size()) +
                " trials";
    return;
  }
  r.status = Status::kOk;
}

std::string FormatSpeedup(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3fx", x);
  return buf;
}

// The judge's static estimate: why it is not trusted, and the compiler's profile per kernel. The
// numbers (estimated_speedup, estimate_trusted, ...) come in the estimates map like the others.
void ReadStaticEstimate(const json& event, EvalResult& r) {
  // The judge's numbers for this candidate (estimated_speedup only when it trusts the estimate;
  // the reference's figures reach it in the job when they are cached here).
  const json estimates = event.value("estimates", json::object());
  if (estimates.is_object())
    for (const auto& [name, value] : estimates.items())
      if (value.is_number()) r.estimates[name] = value.get<double>();
  const json reasons = event.value("estimate_reasons", json::array()), kernels = event.value("static_profile", json::array());
  if (reasons.is_array())
    for (const json& reason : reasons)
      if (reason.is_string()) r.estimate_reasons.push_back(reason.get<std::string>());
  if (!kernels.is_array()) return;
  for (const json& k : kernels) {
    if (!k.is_object()) continue;
    auto number = [&](const char* key) {
      const auto it = k.find(key);
      return it != k.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    TpuKernelProfile profile;
    profile.kernel = k.value("kernel", std::string("?"));
    profile.grid_steps = number("grid_steps");
    profile.bundles_per_step = number("bundles_per_step");
    profile.estimated_cycles = number("estimated_cycles");
    profile.critical_path_cycles = number("critical_path_cycles");
    const json shares = k.value("unit_share", json::object());
    if (shares.is_object())
      for (const auto& [unit, share] : shares.items())
        if (share.is_number()) profile.unit_share[unit] = share.get<double>();
    r.tpu_profile.push_back(std::move(profile));
  }
}

// The judge's timing block: representative only when a TPU's own clock produced the samples.
void ReadTiming(const json& timing, const TimingOptions& options, EvalResult& r) {
  r.timing_clock = timing.value("clock", "none");
  r.timing_note = timing.value("reason", "");
  r.timing_representative = timing.value("representative", false) && r.timing_clock == "tpu_device";
  if (!r.timing_representative) return;
  TimingReport report;
  std::vector<double> reference_ns, candidate_ns;
  for (const json& s : timing.value("samples", json::array())) {
    TimingSample sample;
    sample.reference_ns = s.value("reference_ns", 0.0);
    sample.candidate_ns = s.value("candidate_ns", 0.0);
    sample.reference_cpu_ns = sample.reference_ns;  // device time: no preemption to discard
    sample.candidate_cpu_ns = sample.candidate_ns;
    if (sample.reference_ns <= 0 || sample.candidate_ns <= 0) continue;
    reference_ns.push_back(sample.reference_ns);
    candidate_ns.push_back(sample.candidate_ns);
    report.samples.push_back(sample);
  }
  const RatioEstimate speedup = EstimateSpeedup(report.samples);
  if (speedup.median <= 0) {
    r.timing_representative = false;
    r.timing_note = "the TPU trace gave " + std::to_string(report.samples.size()) +
                    " usable rounds (6 needed for an interval): " + r.timing_note;
    return;
  }
  report.reference = Summarize(reference_ns);
  report.candidate = Summarize(candidate_ns);
  report.speedup = speedup.median;
  report.speedup_ci_low = speedup.low;
  report.speedup_ci_high = speedup.high;
  report.rounds = static_cast<int>(report.samples.size());
  // The cpu backend's rule: the interval met its target on at least the minimum number of rounds.
  report.converged = speedup.relative_half_width <= options.target_relative_ci &&
                     static_cast<int>(report.samples.size()) >= options.min_rounds;
  report.seconds = timing.value("seconds", 0.0);
  r.timing = report;
  r.stage = Stage::kTiming;
  if (timing.contains("profile") && timing["profile"].is_object()) {
    ProfileReport profile;
    for (const auto& [name, value] : timing["profile"].items())
      if (value.is_number()) profile.counters[name] = value.get<double>();
    profile.achieved_gflops = profile.counters.count("achieved_flops") ? profile.counters["achieved_flops"] / 1e9 : 0;
    profile.peak_gflops = profile.counters.count("peak_flops") ? profile.counters["peak_flops"] / 1e9 : 0;
    r.profile = profile;
  }
}

}  // namespace

PallasSettings DefaultPallasSettings() {
  PallasSettings s;
  const char* python = std::getenv("KERNELGYM_PALLAS_PYTHON");
  s.python = python && *python ? python : KERNELGYM_PALLAS_VENV "/bin/python";
  s.package_dir = KERNELGYM_PALLAS_PACKAGE_DIR;
  if (const char* target = std::getenv("KERNELGYM_PALLAS_TARGET"); target && *target) s.target = target;
  if (const char* fork = std::getenv("KERNELGYM_PALLAS_FORK_SERVER"); fork && std::string(fork) == "0")
    s.fork_server = false;
  return s;
}

PallasBackend::PallasBackend(const BackendConfig& config, PallasSettings settings)
    : config_(config),
      settings_(std::move(settings)),
      judges_(std::make_unique<PallasWorkerPool>(settings_, std::filesystem::path(config_.cache_dir) / "pallas", Role::kJudge)),
      tracers_(std::make_unique<PallasWorkerPool>(settings_, std::filesystem::path(config_.cache_dir) / "pallas",
                                                  Role::kTracer)) {}

PallasBackend::~PallasBackend() = default;

std::unique_ptr<PallasWorker> PallasBackend::TakeWorker(Role role, std::string& error) {
  return (role == Role::kJudge ? judges_ : tracers_)->Take(error);
}

void PallasBackend::Prestart() {
  if (!config_.prestart_harness) return;
  // On a TPU VM one process at a time may hold the chips: the next judge starts after this one
  // (a fork server's judge opens them only in the job's process, so it may start ahead).
  if (TpuDevices().empty() || judges_->forking()) judges_->Prestart();
  tracers_->Prestart();
}

namespace {

// Waits for a process's `ready` event; false (with the verdict filled in) when it never comes.
bool AwaitReady(PallasWorker& worker, double timeout_s, EvalResult& r) {
  if (worker.ready) return true;
  json event;
  const auto read = worker.Next(After(timeout_s), event);
  if (read == PallasWorker::Read::kEvent && event.value("event", "") == "ready") {
    worker.ready = event;
    return true;
  }
  r.status = Status::kInternalError;
  r.message = read == PallasWorker::Read::kTimeout
                  ? "the pallas " + worker.role + " was not ready within " + Seconds(timeout_s) + " s"
                  : "the pallas " + worker.role + " failed to start: " + event.dump().substr(0, 300);
  worker.Kill();
  worker.AwaitEnd(After(5));
  worker.DrainOutput();
  r.details.push_back("stderr: " + HeadLines(worker.stderr_text(), 20));
  return false;
}

// The traced program the tracer wrote to `file`, read without following a link and only when it
// is a regular file of at most `limit` bytes; false with `why_not` (the candidate's doing) otherwise.
bool ReadTracedProgram(const std::filesystem::path& file, std::size_t limit, std::string& program,
                       std::string& why_not) {
  const int fd = open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why_not = errno == ELOOP ? "the traced program is not a regular file (a symbolic link)"
                             : "the tracer announced a traced program it did not write";
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    why_not = "the traced program is not a regular file";
    return false;
  }
  if (static_cast<std::size_t>(st.st_size) > limit) {
    close(fd);
    why_not = "the traced program is " + std::to_string(st.st_size) + " bytes (the limit is " +
              std::to_string(limit >> 20) + " MiB)";
    return false;
  }
  program.clear();
  char chunk[65536];
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || program.size() + static_cast<std::size_t>(n) > limit) {
      close(fd);
      why_not = "the traced program could not be read whole";
      return false;
    }
    program.append(chunk, static_cast<std::size_t>(n));
  }
  close(fd);
  return true;
}

// Where a process came from, for the record (its `ready` event says): "judge: forked by its fork
// server (job 3)" or "tracer: a process started for this evaluation".
std::string Origin(const PallasWorker& worker) {
  const int job = worker.ready->value("fork_server_job", 0);
  return worker.role + (job > 0 ? ": forked by its fork server (job " + std::to_string(job) + ")"
                                : ": a process started for this evaluation");
}

// The reference's outputs, as the judge announced them: read here before the judge is given the
// candidate's program. False (with the verdict filled in) when they cannot be read.
bool ReadExpected(const json& event, const std::filesystem::path& job_dir,
                  std::map<std::pair<int, int>, Expected>& expected, EvalResult& r) {
  int trial = 0;
  for (const json& t : event.value("trials", json::array())) {
    std::vector<std::string> hashes = t.value("inputs_sha256", std::vector<std::string>{});
    int k = 0;
    for (const json& o : t.value("outputs", json::array())) {
      Expected e;
      e.spec.name = o.value("name", "out" + std::to_string(k));
      const std::optional<DType> dtype = ParseDType(o.value("dtype", ""));
      const std::optional<std::string> bytes = ReadBinary(job_dir / std::filesystem::path(o.value("file", "")).filename());
      if (!dtype || !bytes) {
        r.status = Status::kInternalError;
        r.message = "the reference's output '" + e.spec.name + "' has dtype " + o.value("dtype", "?") +
                    (bytes ? "" : " and no data") + " (float32/64, int32/64 are compared)";
        return false;
      }
      e.spec.dtype = *dtype;
      e.spec.shape = Shape(o.at("shape"));
      e.spec.tolerance = {o.value("atol", 0.0), o.value("rtol", 0.0)};
      e.bytes = *bytes;
      e.inputs_sha256 = hashes;
      expected[{trial, k}] = std::move(e);
      ++k;
    }
    ++trial;
  }
  return true;
}

// What the tracer may say about the candidate: only failures (an import or trace error, a
// program that cannot be handed over). It cannot say "ok".
Status TracerStatus(const std::string& name) {
  if (name == "compile_error") return Status::kCompileError;
  if (name == "rejected") return Status::kRejected;
  return Status::kCrashed;
}

void CopyDiagnostics(const json& event, EvalResult& r) {
  for (const auto& d : event.value("diagnostics", json::array())) {
    if (!d.is_object()) continue;
    Diagnostic diag;
    diag.file = "candidate.py";
    diag.line = d.value("line", 0);
    diag.column = d.value("column", 0);
    diag.severity = d.value("severity", "error");
    diag.message = d.value("message", "");
    r.diagnostics.push_back(std::move(diag));
  }
}

}  // namespace

EvalResult PallasBackend::Evaluate(const Task& task, const std::string& source, const EvalOptions& options) {
  const auto start = Clock::now();
  EvalResult r;
  r.task_id = task.id;
  r.backend = "pallas";
  r.timing_representative = false;
  r.timing_clock = "none";
  auto finish = [&]() -> EvalResult {
    r.seconds = SecondsSince(start);
    return r;
  };
  auto variant = task.variants.find("pallas");
  if (variant == task.variants.end()) {
    r.status = Status::kRejected;
    r.message = "task " + task.id + " has no pallas version (no pallas/ folder)";
    return finish();
  }

  std::string error;
  std::unique_ptr<PallasWorker> judge = TakeWorker(Role::kJudge, error);
  std::unique_ptr<PallasWorker> tracer = judge ? TakeWorker(Role::kTracer, error) : nullptr;
  if (!judge || !tracer) {
    r.status = Status::kInternalError;
    r.message = error;
    return finish();
  }
  // The judge first: its static check and reference do not need the tracer, which may finish
  // starting meanwhile (it is awaited only when it gets its job).
  if (!AwaitReady(*judge, settings_.start_timeout_s, r)) return finish();
  r.stage_seconds["worker_wait"] = SecondsSince(start);
  Prestart();  // the next evaluation's processes import jax while this one runs

  std::vector<uint64_t> seeds = options.seeds;
  if (seeds.empty()) {
    std::random_device device;
    for (int i = 0; i < task.trials; ++i) seeds.push_back((uint64_t{device()} << 32) ^ device());
  }
  // The source goes to both: the judge reads it (the static check), the tracer imports it.
  for (const PallasWorker* w : {judge.get(), tracer.get()}) {
    std::ofstream out(w->job_dir / "candidate.py");
    out << source;
  }
  // The task's files travel into the judge's folder only (the judge was started before the task
  // was known, so its view cannot hold the task's own folder): task.json and pallas/, or the
  // JAXBench case folder. The tracer never sees them.
  const std::filesystem::path task_copy = judge->job_dir / "task";
  {
    std::error_code ec;
    const auto recursive = std::filesystem::copy_options::recursive;
    if (variant->second.layout == "jaxbench") {
      std::filesystem::copy(variant->second.dir, task_copy, recursive, ec);
    } else {
      std::filesystem::create_directories(task_copy, ec);
      if (!ec) std::filesystem::copy_file(task.dir / "task.json", task_copy / "task.json", ec);
      if (!ec) std::filesystem::copy(variant->second.dir, task_copy / "pallas", recursive, ec);
    }
    if (ec) {
      r.status = Status::kInternalError;
      r.message = "cannot copy the task's files into the judge's folder: " + ec.message();
      return finish();
    }
  }
  json seeds_json = json::array();
  for (uint64_t s : seeds) seeds_json.push_back(s & ((uint64_t{1} << 53) - 1));  // exact in a JSON double
  json job = {{"task_dir", task_copy.string()},
              {"layout", variant->second.layout},
              {"suite", task.Suite()},
              {"out_dir", judge->job_dir.string()},
              {"candidate_path", (judge->job_dir / "candidate.py").string()},
              {"seeds", seeds_json},
              {"static_check", settings_.static_check},
              {"run_timing", options.run_timing},
              {"timing_seed", options.timing_seed & ((uint64_t{1} << 53) - 1)}};
  // XLA's estimate for the reference depends on the task alone: compiled once per backend.
  std::optional<std::map<std::string, double>> cached_estimates;
  {
    std::lock_guard<std::mutex> lock(estimates_mutex_);
    if (auto it = estimates_.find(task.id); it != estimates_.end()) cached_estimates = it->second;
  }
  job["estimates"] = options.estimates && !cached_estimates.has_value();
  // The judge prices the candidate against the reference's estimate; cached here, so it is sent.
  if (cached_estimates && options.estimates) job["reference_estimates"] = *cached_estimates;
  if (cached_estimates && options.estimates)
    for (const auto& [name, value] : *cached_estimates) r.estimates[name] = value;
  r.protections = NamespaceProtections();
  r.protections["seccomp"] = true;
  r.protections["static_check"] = settings_.static_check;
  r.protections["fresh_process"] = true;
  r.protections["separate_judge"] = true;
  const bool on_tpu = judge->ready->value("on_tpu", false);
  if (!on_tpu) r.timing_note = "no TPU on this host: interpret-mode time says nothing about a TPU's";
  r.details.push_back("tpu target: " + judge->ready->value("target", settings_.target) + " (" +
                      judge->ready->value("device_kind", "?") + "), " +
                      (on_tpu ? "this host's TPU" : "deviceless compile; correctness in TPU interpret mode") +
                      ", jax " + judge->ready->value("jax", "?"));
  r.details.push_back(Origin(*judge));
  if (!judge->Send({{"job", job}})) {
    Died(*judge, r, Stage::kStaticCheck, "before it read the job");
    r.status = Status::kInternalError;
    return finish();
  }

  const double call_timeout = std::max(1.0, options.call_timeout_seconds);
  const double compile_timeout = std::max(10.0, 3 * call_timeout);
  // The task's own reference: trusted, but not unbounded. Its XLA estimate compiles it at the
  // full TPU shapes, which takes minutes for the largest references on a busy machine.
  const double reference_timeout = job["estimates"].get<bool>() ? 600 : 120;
  const auto reference_deadline = After(reference_timeout);
  json event;

  // 1. The judge's static check, then the inputs' shapes for the tracer.
  {
    const PallasWorker::Read read = judge->Next(reference_deadline, event);
    if (read != PallasWorker::Read::kEvent) {
      if (read == PallasWorker::Read::kClosed) Died(*judge, r, Stage::kStaticCheck, "before the static check");
      r.status = Status::kInternalError;
      r.stage = Stage::kStaticCheck;
      if (read != PallasWorker::Read::kClosed)
        r.message = "the judge did not answer the job: " + (read == PallasWorker::Read::kTimeout ? "timeout" : judge->garbled);
      return finish();
    }
    if (event.value("event", "") == "result") {  // the static check refused it, or the task did not load
      const std::optional<Status> status = WorkerStatus(event.value("status", ""));
      r.status = status.value_or(Status::kInternalError);
      r.stage = ParseStage(event.value("stage", "static_check")).value_or(Stage::kStaticCheck);
      r.message = event.value("message", "");
      CopyDiagnostics(event, r);
      for (const auto& line : event.value("details", json::array()))
        if (line.is_string()) r.details.push_back(line.get<std::string>());
      return finish();
    }
    if (event.value("event", "") != "specs" || !event.contains("size_sets") || !event["size_sets"].is_object()) {
      r.status = Status::kInternalError;
      r.message = "unexpected judge event '" + event.value("event", "") + "'";
      return finish();
    }
  }
  const std::filesystem::path program_in_tracer = tracer->job_dir / "program.pkl";
  if (!AwaitReady(*tracer, settings_.start_timeout_s, r)) return finish();
  r.details.push_back(Origin(*tracer));
  if (!tracer->Send({{"job",
                      {{"candidate_path", (tracer->job_dir / "candidate.py").string()},
                       {"size_sets", event["size_sets"]},
                       {"artifact_path", program_in_tracer.string()}}}})) {
    Died(*tracer, r, Stage::kCompile, "before it read the job");
    return finish();
  }
  const auto trace_deadline = After(compile_timeout);

  // 2. Both at once: the judge runs the reference while the tracer traces the candidate. The
  // reference's outputs are read here before the judge sees anything the tracer wrote.
  std::map<std::pair<int, int>, Expected> expected;
  bool have_reference = false, have_program = false;
  while (!have_reference || !have_program) {
    std::vector<std::pair<PallasWorker*, Clock::time_point>> waiting;
    if (!have_reference) waiting.push_back({judge.get(), reference_deadline});
    if (!have_program) waiting.push_back({tracer.get(), trace_deadline});
    const auto [index, read] = NextOfWorkers(waiting, event);
    PallasWorker& from = *waiting[index].first;
    if (&from == judge.get()) {
      if (read == PallasWorker::Read::kEvent && event.value("event", "") == "reference") {
        if (!ReadExpected(event, judge->job_dir, expected, r)) return finish();
        // Cached only when this job asked for them (a job without estimates answers {}).
        if (job["estimates"].get<bool>() && event.contains("estimates") && event["estimates"].is_object()) {
          std::map<std::string, double> fresh;
          for (const auto& [name, value] : event["estimates"].items())
            if (value.is_number()) fresh[name] = value.get<double>();
          for (const auto& [name, value] : fresh) r.estimates[name] = value;
          std::lock_guard<std::mutex> lock(estimates_mutex_);
          estimates_[task.id] = std::move(fresh);
        }
        have_reference = true;
        continue;
      }
      r.stage = Stage::kStaticCheck;
      if (read == PallasWorker::Read::kClosed) {
        Died(*judge, r, Stage::kStaticCheck, "while the reference ran");
      } else {
        r.message = read == PallasWorker::Read::kTimeout
                        ? "the task's reference did not finish within " + Seconds(reference_timeout) + " s"
                        : read == PallasWorker::Read::kGarbled ? "the judge's report channel carried: " + judge->garbled
                                                               : "the judge answered '" + event.value("event", "") +
                                                                     "' before the reference: " + event.value("message", "");
      }
      r.status = Status::kInternalError;
      return finish();
    }
    // The tracer: only the candidate's code runs there, so whatever goes wrong is the candidate's.
    r.stage = Stage::kCompile;
    if (read == PallasWorker::Read::kEvent && event.value("event", "") == "traced") {
      have_program = true;
      const json tracer_seconds = event.value("stage_seconds", json::object());
      for (const auto& [name, value] : tracer_seconds.items())
        if (value.is_number()) r.stage_seconds["tracer_" + name] = value.get<double>();
      continue;
    }
    if (read == PallasWorker::Read::kTimeout) {
      tracer->Kill();
      r.status = Status::kTimeout;
      r.message = "the candidate did not finish compile within its limit (" + Seconds(compile_timeout) +
                  " s for its import and tracing)";
    } else if (read == PallasWorker::Read::kClosed) {
      Died(*tracer, r, Stage::kCompile, "while the candidate was imported and traced");
    } else if (read == PallasWorker::Read::kGarbled) {
      tracer->Kill();
      r.status = Status::kCrashed;
      r.message = "the tracer's report channel carried something that is not an event: " + tracer->garbled;
    } else if (event.value("event", "") == "result") {
      r.status = TracerStatus(event.value("status", ""));
      r.message = event.value("message", "");
      CopyDiagnostics(event, r);
      for (const auto& line : event.value("details", json::array()))
        if (line.is_string()) r.details.push_back(line.get<std::string>());
    } else {
      r.status = Status::kCrashed;
      r.message = "unexpected tracer event '" + event.value("event", "") + "'";
    }
    return finish();
  }

  // 3. The tracer is done: its process ends (or is killed) before its program is read, so that
  // nothing of the candidate runs while the program crosses into the judge's folder (the runner
  // copies it: the two processes share no folder).
  tracer->Finish(After(2));
  {
    // Read through a descriptor opened without following links: the tracer's folder is the
    // candidate's to write, and a link there would point this process (outside every sandbox) at
    // a file of the host of the candidate's choosing.
    std::string program, why_not;
    if (!ReadTracedProgram(program_in_tracer, std::size_t{256} << 20, program, why_not)) {
      r.status = Status::kRejected;
      r.stage = Stage::kCompile;
      r.message = why_not;
      return finish();
    }
    std::ofstream out(judge->job_dir / "program.pkl", std::ios::binary | std::ios::trunc);
    out << program;
    if (!out.flush()) {
      r.status = Status::kInternalError;
      r.message = "cannot copy the traced program to the judge's folder";
      return finish();
    }
  }
  tracer.reset();  // its fork server is free for the next evaluation
  if (!judge->Send({{"artifact", "program.pkl"}})) {
    Died(*judge, r, Stage::kCompile, "before it read the traced program");
    return finish();
  }

  // 4. The judge checks, compiles and runs the program.
  Stage stage = Stage::kCompile;
  auto deadline = After(compile_timeout);
  for (;;) {
    const PallasWorker::Read read = judge->Next(deadline, event);
    if (read == PallasWorker::Read::kTimeout) {
      judge->Kill();
      r.status = Status::kTimeout;
      r.stage = stage;
      r.message = "the candidate did not finish " + std::string(StageName(stage)) + " within its limit (" +
                  (stage == Stage::kCompile ? Seconds(compile_timeout) : Seconds(call_timeout)) + " s)";
      return finish();
    }
    // From here the judge works on the candidate's program: its death is the program's doing.
    if (read == PallasWorker::Read::kClosed) {
      Died(*judge, r, stage, "while it ran the candidate's program");
      return finish();
    }
    if (read == PallasWorker::Read::kGarbled) {
      judge->Kill();
      r.status = Status::kInternalError;
      r.stage = stage;
      r.message = "the judge's report channel carried something that is not an event: " + judge->garbled;
      return finish();
    }
    const std::string kind = event.value("event", "");
    if (kind == "progress") {
      stage = event.value("stage", "") == "compiled" || event.value("stage", "") == "trial" ? Stage::kCorrectness : stage;
      deadline = After(call_timeout + (event.value("trial", 0) == 0 && event.value("repeat", 0) == 0 ? compile_timeout : 0));
    } else if (kind == "result") {
      break;
    } else {
      judge->Kill();
      r.status = Status::kInternalError;
      r.message = "unexpected judge event '" + kind + "'";
      return finish();
    }
  }

  // The judge's facts, then the verdict.
  const json stage_seconds = event.value("stage_seconds", json::object());
  for (const auto& [name, value] : stage_seconds.items())
    if (value.is_number()) r.stage_seconds[name] = value.get<double>();
  if (event.contains("tpu_compile") && event["tpu_compile"].is_object()) {
    const json& c = event["tpu_compile"];
    r.stage_seconds["tpu_compile"] = c.value("seconds", 0.0);
    const json memory = c.value("memory", json::object());
    for (const auto& [name, value] : memory.items())
      if (value.is_number()) r.estimates["tpu_" + name] = value.get<double>();
    r.estimates["tpu_compile_deviceless"] = c.value("deviceless", true) ? 1 : 0;
  }
  CopyDiagnostics(event, r);
  for (const auto& line : event.value("details", json::array()))
    if (line.is_string()) r.details.push_back(line.get<std::string>());
  const std::string status_name = event.value("status", "");
  const std::optional<Status> status = WorkerStatus(status_name);
  const std::string stage_name = event.value("stage", "correctness");
  r.stage = ParseStage(stage_name).value_or(Stage::kCorrectness);
  r.message = event.value("message", "");
  if (!status) {
    r.status = Status::kInternalError;
    r.message = "the judge answered status '" + status_name + "'";
    return finish();
  }
  if (*status != Status::kOk) {
    r.status = *status;
    if (event.contains("timing") && event["timing"].is_object()) r.timing_note = event["timing"].value("reason", "");
    return finish();
  }
  Judge(event, judge->job_dir, expected, seeds, r);
  ReadStaticEstimate(event, r);
  if (r.status == Status::kOk) {
    if (event.contains("timing") && event["timing"].is_object()) ReadTiming(event["timing"], options.timing, r);
    r.stage = r.timing ? Stage::kTiming : Stage::kCorrectness;
    r.message = r.timing ? "correct; timed on the TPU" : "correct (TPU interpret mode); not timed: " + r.timing_note;
    // No TPU here: the compiler's static estimate is the speed signal, when the judge trusts it. (On
    // a TPU host the measurement is the signal, and one that failed is not replaced by an estimate.)
    if (!on_tpu && !r.timing_representative) {
      r.timing_clock = std::string(kTpuEstimateClock);
      const RewardableSpeedup estimated = RewardableSpeedupOf(r);
      if (estimated.kind == SpeedupKind::kEstimated)
        r.message += "; speed estimated from the TPU compiler's static figures: " + FormatSpeedup(estimated.value) +
                     " (not a measurement)";
      else if (r.estimates.count("estimated_speedup_untrusted") || !r.estimate_reasons.empty())
        r.message += "; the TPU estimate is not trusted, so speed earns nothing";
      else
        r.timing_clock = "none";
    }
  }
  return finish();
}

}  // namespace kernelgym
