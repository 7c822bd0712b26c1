#include "tpu_runner/pallas/pallas_backend.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/resident_limit.h"
#include "tpu_runner/pallas/pallas_stages.h"
#include "tpu_runner/pallas/pallas_verdict.h"
#include "tpu_runner/pallas/pallas_worker.h"
#include "tpu_runner/sandbox.h"

namespace kernelgym {

using Clock = std::chrono::steady_clock;

namespace {

// An amount of memory in MiB from the environment variable `name`, when it is set. Not a positive
// number of MiB: `bytes` keeps its default (zero would kill every job, garbage must not remove
// the limit), and the runner says so where its operator looks.
void ReadMiB(const char* name, std::uint64_t& bytes) {
  const char* mib = std::getenv(name);
  if (!mib || !*mib) return;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(mib, &end, 10);
  if (*end == '\0' && value > 0 && value < (1ull << 30)) {
    bytes = static_cast<std::uint64_t>(value) << 20;
    return;
  }
  std::fprintf(stderr, "kernelgym: %s='%s' is not a positive whole number of MiB; the limit stays %s\n", name, mib,
               MemoryAmount(bytes).c_str());
}

}  // namespace

PallasSettings DefaultPallasSettings() {
  PallasSettings s;
  const char* python = std::getenv("KERNELGYM_PALLAS_PYTHON");
  s.python = python && *python ? python : KERNELGYM_PALLAS_VENV "/bin/python";
  const char* package = std::getenv("KERNELGYM_PALLAS_PACKAGE_DIR");
  s.package_dir = package && *package ? package : KERNELGYM_PALLAS_PACKAGE_DIR;
  if (const char* target = std::getenv("KERNELGYM_PALLAS_TARGET"); target && *target) s.target = target;
  if (const char* fork = std::getenv("KERNELGYM_PALLAS_FORK_SERVER"); fork && std::string(fork) == "0")
    s.fork_server = false;
  if (const char* cache = std::getenv("KERNELGYM_PALLAS_COMPILE_CACHE"); cache && std::string(cache) == "0")
    s.compile_cache = false;
  ReadMiB("KERNELGYM_PALLAS_RESIDENT_LIMIT_MIB", s.resident_limit_bytes);
  ReadMiB("KERNELGYM_PALLAS_TPU_JUDGE_RESIDENT_LIMIT_MIB", s.tpu_judge_resident_limit_bytes);
  return s;
}

PallasBackend::PallasBackend(const BackendConfig& config, PallasSettings settings)
    : config_(config),
      settings_(std::move(settings)),
      judges_(std::make_unique<PallasWorkerPool>(settings_, std::filesystem::path(config_.cache_dir) / "pallas", Role::kJudge,
                                                 /*fork_ahead=*/config_.prestart_harness)),
      tracers_(std::make_unique<PallasWorkerPool>(settings_, std::filesystem::path(config_.cache_dir) / "pallas",
                                                  Role::kTracer, /*fork_ahead=*/config_.prestart_harness)),
      judge_code_(JudgeCodeDigest(settings_.package_dir)),
      packages_(InstalledPackages(settings_.python)),
      // On disk only where every job runs in bubblewrap, whose binds give a job its own folder
      // and nothing else of the cache folder to write.
      reference_estimates_(ProbeSandbox().bwrap ? std::filesystem::path(config_.cache_dir) / "pallas" / "reference-estimates"
                                                : std::filesystem::path()),
      candidate_compiles_(ProbeSandbox().bwrap ? std::filesystem::path(config_.cache_dir) / "pallas" / "candidate-compiles"
                                               : std::filesystem::path()) {}

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

EvalResult PallasBackend::Evaluate(const Task& task, const std::string& source, const EvalOptions& options) {
  const auto start = Clock::now();
  EvalResult r;
  r.task_id = task.id;
  r.backend = name();
  r.timing_representative = false;
  r.timing_clock = "none";
  if (StageOutcome stop = RunStages(task, source, options, r)) {
    r.status = stop->status;
    r.stage = stop->stage;
    r.message = std::move(stop->message);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

StageOutcome PallasBackend::RunStages(const Task& task, const std::string& source, const EvalOptions& options,
                                      EvalResult& r) {
  const auto start = Clock::now();
  auto variant = task.variants.find(name());
  if (variant == task.variants.end())
    return Stop{Status::kRejected, Stage::kStaticCheck, "task " + task.id + " has no pallas version (no pallas/ folder)"};
  Evaluation e(task, variant->second, options, settings_, r);
  std::string error;
  e.judge = TakeWorker(Role::kJudge, error);
  e.tracer = e.judge ? TakeWorker(Role::kTracer, error) : nullptr;
  if (!e.judge || !e.tracer) return Stop{Status::kInternalError, Stage::kStaticCheck, error};
  // The judge first: its static check and reference do not need the tracer, which may finish
  // starting meanwhile (it is awaited only when it gets its job).
  if (StageOutcome stop = AwaitReady(*e.judge, settings_.start_timeout_s, r)) return stop;
  r.stage_seconds["worker_wait"] = std::chrono::duration<double>(Clock::now() - start).count();
  Prestart();  // the next evaluation's processes import jax while this one runs

  StageOutcome stop = PrepareJob(e, source);
  std::optional<ReferenceEstimateKey> key;
  if (!stop && options.estimates) {
    key = ReferenceKeyOf(e);
    UseReferenceEstimate(e, reference_estimates_.Find(*key));
  }
  if (!stop) {
    e.compiles = settings_.compile_cache ? &candidate_compiles_ : nullptr;
    e.compile_key = CandidateCompileKey{ReferenceKeyOf(e), ""};
  }
  if (!stop) stop = StaticCheckStage(e);
  if (!stop) stop = ReferenceAndTraceStage(e);
  if (key && e.job.estimate_reference && e.reference_estimate) reference_estimates_.Store(*key, *e.reference_estimate);
  for (auto stage : {AwaitJudgeResult, StructureStage, CompileStage, EstimateStage, CorrectnessStage, TimingStage})
    if (!stop) stop = stage(e);
  RecordResidentPeak(e.judge.get(), r);
  RecordResidentPeak(e.tracer.get(), r);  // still here when the evaluation stopped before it ended
  if (stop) return stop;
  DecideVerdict(r, e.judge->ready->on_tpu);
  return std::nullopt;
}

ReferenceEstimateKey PallasBackend::ReferenceKeyOf(const Evaluation& e) const {
  const judge::Ready& ready = *e.judge->ready;
  return ReferenceEstimateKey{.judge_code = judge_code_,
                              .packages = packages_,
                              .target = ready.target,
                              .device_kind = ready.device_kind,
                              .jax = ready.jax,
                              .on_tpu = ready.on_tpu,
                              .task_id = e.task.id,
                              .layout = e.job.layout,
                              .suite = e.job.suite,
                              .task_files = e.task_files_digest};
}

}  // namespace kernelgym
