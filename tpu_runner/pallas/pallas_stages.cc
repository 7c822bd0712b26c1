#include "tpu_runner/pallas/pallas_stages.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <random>
#include <sstream>

#include "core/digest.h"
#include "core/subprocess.h"
#include "tpu_runner/pallas/pallas_verdict.h"
#include "tpu_runner/pallas/pallas_worker.h"
#include "tpu_runner/sandbox.h"

namespace kernelgym {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// "12" or "2.5": a limit in seconds as a person writes it.
std::string Seconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::optional<std::string> ReadBinary(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

int64_t JsonExact(uint64_t seed) { return static_cast<int64_t>(seed & ((uint64_t{1} << 53) - 1)); }

// What a process's death or silence means for the verdict; its stderr goes to the details.
Stop Died(PallasWorker& worker, EvalResult& r, Stage stage, const std::string& during) {
  worker.AwaitEnd(After(5));
  worker.DrainOutput();
  const std::string stderr_head = HeadLines(worker.stderr_text(), 12);
  if (!stderr_head.empty()) r.details.push_back("stderr: " + stderr_head);
  // Before the signal: the watchdog's SIGKILL would otherwise read as any other kill.
  if (worker.resident_exceeded()) return {Status::kCrashed, stage, worker.resident_verdict() + " " + during};
  const int signal = worker.signal();
  if (signal == SIGSYS)
    return {Status::kSandboxViolation, stage,
            "a forbidden system call (seccomp killed the " + worker.role + " with SIGSYS) " + during};
  if (signal != 0) return {Status::kCrashed, stage, "the " + worker.role + " was killed by " + SignalName(signal) + " " + during};
  return {Status::kCrashed, stage,
          "the " + worker.role + " exited (code " + std::to_string(worker.exit_code()) + ") " + during};
}

std::optional<Status> JudgeStatus(const std::string& name) {
  static const std::map<std::string, Status> kStatuses = {
      {"ok", Status::kOk},           {"rejected", Status::kRejected},         {"compile_error", Status::kCompileError},
      {"incorrect", Status::kIncorrect}, {"crashed", Status::kCrashed},       {"internal_error", Status::kInternalError}};
  auto it = kStatuses.find(name);
  return it == kStatuses.end() ? std::nullopt : std::optional(it->second);
}

// What the tracer may say about the candidate: only failures (an import or trace error, a
// program that cannot be handed over). It cannot say "ok".
Status TracerStatus(const std::string& name) {
  if (name == "compile_error") return Status::kCompileError;
  if (name == "rejected") return Status::kRejected;
  return Status::kCrashed;
}

void CopyDiagnostics(const judge::Result& result, EvalResult& r) {
  for (const judge::Diagnostic& d : result.diagnostics) {
    Diagnostic diag;
    diag.file = "candidate.py";
    diag.line = static_cast<int>(d.line);
    diag.column = static_cast<int>(d.column);
    diag.severity = d.severity;
    diag.message = d.message;
    r.diagnostics.push_back(std::move(diag));
  }
  for (const std::string& line : result.details) r.details.push_back(line);
}

// Where a process came from, for the record: "judge: forked by its fork server (job 3)" or
// "tracer: a process started for this evaluation".
std::string Origin(const PallasWorker& worker) {
  const int64_t job = worker.ready ? worker.ready->fork_server_job : 0;
  return worker.role + (job > 0 ? ": forked by its fork server (job " + std::to_string(job) + ")" +
                                      (worker.forked_ahead ? ", ahead of its evaluation" : "")
                                : ": a process started for this evaluation");
}

// The traced program the tracer wrote to `file`, read without following a link and only when it
// is a regular file of at most `limit` bytes; false with `why_not` (the candidate's doing) otherwise.
bool ReadTracedProgram(const std::filesystem::path& file, std::size_t limit, std::string& program, std::string& why_not) {
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

// The reference's outputs, as the judge announced them: read here before the judge is given the
// candidate's program.
StageOutcome ReadExpected(const judge::Reference& reference, Evaluation& e) {
  int trial = 0;
  for (const judge::ReferenceTrial& t : reference.trials) {
    int k = 0;
    for (const judge::ExpectedOutput& o : t.outputs) {
      ExpectedOutput out;
      out.spec.name = o.name;
      const std::optional<DType> dtype = ParseDType(o.dtype);
      const std::optional<std::string> bytes = ReadBinary(e.judge->job_dir / std::filesystem::path(o.file).filename());
      if (!dtype || !bytes)
        return Stop{Status::kInternalError, Stage::kStaticCheck,
                    "the reference's output '" + o.name + "' has dtype " + o.dtype + (bytes ? "" : " and no data") +
                        " (float32/64, int32/64 are compared)"};
      out.spec.dtype = *dtype;
      out.spec.shape = o.shape;
      out.spec.tolerance = {o.atol, o.rtol};
      out.bytes = *bytes;
      out.inputs_sha256 = t.inputs_sha256;
      e.expected[{trial, k}] = std::move(out);
      ++k;
    }
    ++trial;
  }
  return std::nullopt;
}

// The judge's failure, as the verdict (its facts were recorded by AwaitJudgeResult).
Stop JudgeFailure(const Evaluation& e) {
  const std::optional<Status> status = JudgeStatus(e.judged.status);
  const Stage stage = ParseStage(e.judged.stage).value_or(Stage::kCorrectness);
  if (!status) return {Status::kInternalError, stage, "the judge answered status '" + e.judged.status + "'"};
  return {*status, stage, e.judged.message};
}

bool JudgeFailed(const Evaluation& e) { return e.judged.status != "ok"; }

// A limit of `cpu_seconds` of the worker's CPU time from now, backed by the settings' wall-clock
// multiple of it.
CpuLimit LimitFor(const Evaluation& e, const PallasWorker& worker, double cpu_seconds) {
  return CpuLimit(worker.tree_pid(), cpu_seconds, e.settings.wall_limit_factor * cpu_seconds);
}

// The next message of whichever worker says something first, each under its limit: kTimeout
// for the worker whose limit passed, and `passed` says which of its limits it was.
std::pair<std::size_t, PallasWorker::Read> NextUnderLimits(const std::vector<std::pair<PallasWorker*, CpuLimit*>>& waiting,
                                                           judge::Message& message, CpuLimit::Passed& passed) {
  for (;;) {
    std::vector<std::pair<PallasWorker*, Clock::time_point>> deadlines;
    for (const auto& [worker, limit] : waiting) deadlines.push_back({worker, limit->NextCheck()});
    const auto [index, read] = NextOfWorkers(deadlines, message);
    if (read != PallasWorker::Read::kTimeout) return {index, read};
    passed = waiting[index].second->Check();
    if (passed != CpuLimit::Passed::kNone) return {index, read};
  }
}

// "within its limit of 30 s of CPU time (it used 30.2 s of CPU in 41.0 s)", or the wall-clock
// backstop's words (its wall-clock time less the time it waited for a CPU): which limit a
// process ran past, and what it spent.
std::string LimitPassed(const CpuLimit& limit, CpuLimit::Passed passed) {
  std::ostringstream out;
  out.precision(3);
  if (passed == CpuLimit::Passed::kCpu)
    out << "within its limit of " << limit.cpu_seconds() << " s of CPU time (it used " << limit.cpu_used()
        << " s of CPU in " << limit.wall_used() << " s)";
  else if (passed == CpuLimit::Passed::kWallCeiling)
    out << "within " << CpuLimit::kCeilingFactor << " times the wall-clock limit of " << limit.wall_seconds()
        << " s that backs up its " << limit.cpu_seconds() << " s CPU-time limit, however long it waited for a CPU (it used "
        << limit.cpu_used() << " s of CPU in " << limit.wall_used() << " s, " << limit.waited()
        << " s of them waiting for a CPU)";
  else
    out << "within the wall-clock limit of " << limit.wall_seconds() << " s that backs up its " << limit.cpu_seconds()
        << " s CPU-time limit (it used " << limit.cpu_used() << " s of CPU in " << limit.wall_used() << " s, "
        << limit.waited() << " s of them waiting for a CPU: it slept or blocked)";
  return out.str();
}

// The judge's key for its full-size program (once, before the compile): an earlier compile's
// facts for the same content, or none (the judge compiles).
StageOutcome AnswerCompileKey(Evaluation& e, const judge::CompileKey& asked) {
  if (e.compile_key && !e.compile_key->program.empty()) {
    e.judge->Kill();
    return Stop{Status::kInternalError, Stage::kCompile, "the judge sent its program's key twice"};
  }
  if (!IsProgramKey(asked.program)) {
    e.judge->Kill();
    return Stop{Status::kInternalError, Stage::kCompile, "the judge's program key is not a SHA-256 in hex"};
  }
  judge::CompileFacts answer;
  if (e.compile_key) e.compile_key->program = asked.program;
  if (e.compiles && e.compile_key) {
    if (std::optional<judge::CompileFacts> found = e.compiles->Find(*e.compile_key)) {
      answer = std::move(*found);
      e.compile_reused = true;
      e.result.details.push_back("candidate compile: reused (compiled and estimated before for this program's "
                                 "content, these task files and this judge)");
    }
  }
  if (!e.judge->Send(answer)) return Died(*e.judge, e.result, Stage::kCompile, "before it read the compile's facts");
  return std::nullopt;
}

// The facts of the compile the judge did for the key it sent, before any of the program ran.
StageOutcome KeepCompileFacts(Evaluation& e, const judge::CompileFacts& compiled) {
  // Kept only when said before any of the candidate's program ran in the judge.
  if (!e.compile_key || e.compile_key->program.empty() || e.compile_reused || e.compile_kept || e.program_ran) {
    e.judge->Kill();
    return Stop{Status::kInternalError, Stage::kCompile, "the judge sent a compile's facts it was not asked for"};
  }
  e.compile_kept = true;
  if (e.compiles && compiled.tpu_compile) {
    e.compiles->Store(*e.compile_key, compiled);
    e.result.details.push_back("candidate compile: computed by this evaluation's judge (kept for this program's content)");
  }
  return std::nullopt;
}

}  // namespace

Evaluation::Evaluation(const Task& t, const BackendVariant& v, const EvalOptions& o, const PallasSettings& s,
                       EvalResult& r)
    : task(t), variant(v), options(o), settings(s), result(r) {}

Evaluation::~Evaluation() = default;

void RecordResidentPeak(const PallasWorker* worker, EvalResult& r) {
  if (!worker || !worker->resident()) return;
  r.details.push_back(worker->role + " resident peak: " + MemoryAmount(worker->resident()->peak_bytes()) +
                      " of its limit of " + MemoryAmount(worker->resident()->limit_bytes()) +
                      " (its sandbox's processes, read every " +
                      Seconds(std::chrono::duration<double>(ResidentLimit::kEvery).count()) + " s)");
}

StageOutcome AwaitReady(PallasWorker& worker, double timeout_s, EvalResult& r) {
  if (worker.ready) return std::nullopt;
  judge::Message message;
  const auto read = worker.Next(After(timeout_s), message);
  if (read == PallasWorker::Read::kEvent)
    if (const auto* ready = std::get_if<judge::Ready>(&message)) {
      worker.ready = *ready;
      return std::nullopt;
    }
  std::string said = read == PallasWorker::Read::kGarbled ? worker.garbled : "";
  if (read == PallasWorker::Read::kEvent)
    said = std::holds_alternative<judge::Fatal>(message) ? std::get<judge::Fatal>(message).message
                                                          : "a '" + judge::KindOf(message) + "' message";
  worker.Kill();
  worker.AwaitEnd(After(5));
  worker.DrainOutput();
  r.details.push_back("stderr: " + HeadLines(worker.stderr_text(), 20));
  // No candidate code has run in it yet: a limit too low for jax's own import, the operator's.
  if (worker.resident_exceeded())
    return Stop{Status::kInternalError, Stage::kStaticCheck,
                "the pallas " + worker.role + " failed to start: " + worker.resident_verdict()};
  return Stop{Status::kInternalError, Stage::kStaticCheck,
              read == PallasWorker::Read::kTimeout
                  ? "the pallas " + worker.role + " was not ready within " + Seconds(timeout_s) + " s"
                  : "the pallas " + worker.role + " failed to start: " + said.substr(0, 300)};
}

StageOutcome PrepareJob(Evaluation& e, const std::string& source) {
  EvalResult& r = e.result;
  e.seeds = e.options.seeds;
  if (e.seeds.empty()) {
    std::random_device device;
    for (int i = 0; i < e.task.trials; ++i) e.seeds.push_back((uint64_t{device()} << 32) ^ device());
  }
  // The source goes to both: the judge reads it (the static check), the tracer imports it.
  for (const PallasWorker* w : {e.judge.get(), e.tracer.get()}) {
    std::ofstream out(w->job_dir / "candidate.py");
    out << source;
  }
  // The task's files travel into the judge's folder only (the judge was started before the task
  // was known, so its view cannot hold the task's own folder): task.json and pallas/, or the
  // JAXBench case folder. The tracer never sees them.
  const std::filesystem::path task_copy = e.judge->job_dir / "task";
  std::error_code ec;
  const auto recursive = std::filesystem::copy_options::recursive;
  if (e.variant.layout == "jaxbench") {
    std::filesystem::copy(e.variant.dir, task_copy, recursive, ec);
  } else {
    std::filesystem::create_directories(task_copy, ec);
    if (!ec) std::filesystem::copy_file(e.task.dir / "task.json", task_copy / "task.json", ec);
    if (!ec) std::filesystem::copy(e.variant.dir, task_copy / e.variant.dir.filename(), recursive, ec);
  }
  if (ec) return Stop{Status::kInternalError, Stage::kStaticCheck,
                      "cannot copy the task's files into the judge's folder: " + ec.message()};
  e.task_files_digest = TaskFolderDigest(task_copy);

  judge::JudgeJob& job = e.job;
  job.task_dir = task_copy.string();
  job.layout = e.variant.layout;
  job.suite = e.task.Suite();
  job.out_dir = e.judge->job_dir.string();
  job.candidate_path = (e.judge->job_dir / "candidate.py").string();
  for (uint64_t s : e.seeds) job.seeds.push_back(JsonExact(s));
  job.static_check = e.settings.static_check;
  job.run_timing = e.options.run_timing;
  job.timing_seed = JsonExact(e.options.timing_seed);
  // The reference's estimate depends on the task and the judge alone: the backend caches it by
  // their content (UseReferenceEstimate), and a job computes it only when there is none yet.
  job.estimate_reference = e.options.estimates;
  job.estimate_candidate = true;

  e.call_timeout = std::max(1.0, e.options.call_timeout_seconds);
  e.compile_timeout = std::max(10.0, 3 * e.call_timeout);
  // The task's own reference: trusted, but not unbounded. Its XLA estimate compiles it at the
  // full TPU shapes, which takes minutes for the largest references on a busy machine.
  e.reference_timeout = job.estimate_reference ? 600 : 120;

  r.protections = NamespaceProtections();
  r.protections["seccomp"] = true;
  r.protections["static_check"] = e.settings.static_check;
  r.protections["fresh_process"] = true;
  r.protections["separate_judge"] = true;
  const judge::Ready& ready = *e.judge->ready;
  if (!ready.on_tpu) r.timing_note = "no TPU on this host: interpret-mode time says nothing about a TPU's";
  r.details.push_back("tpu target: " + (ready.target.empty() ? e.settings.target : ready.target) + " (" +
                      ready.device_kind + "), " +
                      (ready.on_tpu ? "this host's TPU" : "deviceless compile; correctness in TPU interpret mode") +
                      ", jax " + ready.jax);
  r.details.push_back(Origin(*e.judge));
  return std::nullopt;
}

void UseReferenceEstimate(Evaluation& e, std::optional<judge::ReferenceEstimate> cached) {
  if (!e.job.estimate_reference) return;
  if (!cached) {
    e.result.details.push_back("reference estimate: computed by this evaluation's judge");
    return;
  }
  e.reference_estimate = std::move(cached);
  e.job.estimate_reference = false;
  e.reference_timeout = 120;
  e.result.details.push_back("reference estimate: reused (computed before for these task files and this judge)");
}

// 1. The judge's static check, then the inputs' shapes for the tracer.
StageOutcome StaticCheckStage(Evaluation& e) {
  EvalResult& r = e.result;
  if (!e.judge->Send(e.job)) {
    Stop stop = Died(*e.judge, r, Stage::kStaticCheck, "before it read the job");
    stop.status = Status::kInternalError;
    return stop;
  }
  e.reference_limit.emplace(LimitFor(e, *e.judge, e.reference_timeout));
  judge::Message message;
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  const PallasWorker::Read read = NextUnderLimits({{e.judge.get(), &*e.reference_limit}}, message, passed).second;
  if (read == PallasWorker::Read::kClosed) {
    Stop stop = Died(*e.judge, r, Stage::kStaticCheck, "before the static check");
    stop.status = Status::kInternalError;
    return stop;
  }
  if (read != PallasWorker::Read::kEvent)
    return Stop{Status::kInternalError, Stage::kStaticCheck,
                "the judge did not answer the job: " +
                    (read == PallasWorker::Read::kTimeout ? "it did not finish " + LimitPassed(*e.reference_limit, passed)
                                                          : e.judge->garbled)};
  if (const auto* result = std::get_if<judge::Result>(&message)) {  // refused by the static check, or the task did not load
    CopyDiagnostics(*result, r);
    return Stop{JudgeStatus(result->status).value_or(Status::kInternalError),
                ParseStage(result->stage).value_or(Stage::kStaticCheck), result->message};
  }
  const auto* specs = std::get_if<judge::Specs>(&message);
  if (!specs) return Stop{Status::kInternalError, Stage::kStaticCheck, "unexpected judge message '" + judge::KindOf(message) + "'"};
  e.specs = *specs;
  return std::nullopt;
}

// 2. Both at once: the judge runs the reference while the tracer traces the candidate. The
// reference's outputs are read here before the judge sees anything the tracer wrote; then the
// tracer ends and its program crosses into the judge's folder.
StageOutcome ReferenceAndTraceStage(Evaluation& e) {
  EvalResult& r = e.result;
  PallasWorker& judge = *e.judge;
  PallasWorker& tracer = *e.tracer;
  const std::filesystem::path program_in_tracer = tracer.job_dir / "program.pkl";
  if (StageOutcome stop = AwaitReady(tracer, e.settings.start_timeout_s, r)) return stop;
  r.details.push_back(Origin(tracer));
  judge::TraceJob trace_job{(tracer.job_dir / "candidate.py").string(), e.specs.size_sets, program_in_tracer.string()};
  if (!tracer.Send(trace_job)) return Died(tracer, r, Stage::kCompile, "before it read the job");
  CpuLimit trace_limit = LimitFor(e, tracer, e.compile_timeout);

  bool have_reference = false, have_program = false;
  judge::Message message;
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  while (!have_reference || !have_program) {
    std::vector<std::pair<PallasWorker*, CpuLimit*>> waiting;
    if (!have_reference) waiting.push_back({&judge, &*e.reference_limit});
    if (!have_program) waiting.push_back({&tracer, &trace_limit});
    const auto [index, read] = NextUnderLimits(waiting, message, passed);
    if (waiting[index].first == &judge) {
      const auto* reference = read == PallasWorker::Read::kEvent ? std::get_if<judge::Reference>(&message) : nullptr;
      if (reference) {
        if (StageOutcome stop = ReadExpected(*reference, e)) return stop;
        if (e.job.estimate_reference && reference->estimate) e.reference_estimate = reference->estimate;
        have_reference = true;
        continue;
      }
      if (read == PallasWorker::Read::kClosed) {
        Stop stop = Died(judge, r, Stage::kStaticCheck, "while the reference ran");
        stop.status = Status::kInternalError;
        return stop;
      }
      std::string why = read == PallasWorker::Read::kTimeout
                            ? "the task's reference did not finish " + LimitPassed(*e.reference_limit, passed)
                        : read == PallasWorker::Read::kGarbled ? "the judge's report channel carried: " + judge.garbled
                                                               : "the judge answered '" + judge::KindOf(message) + "' before the reference";
      if (const auto* result = std::get_if<judge::Result>(&message); result && read == PallasWorker::Read::kEvent)
        why += ": " + result->message;
      return Stop{Status::kInternalError, Stage::kStaticCheck, why};
    }
    // The tracer: only the candidate's code runs there, so whatever goes wrong is the candidate's.
    if (read == PallasWorker::Read::kEvent)
      if (const auto* traced = std::get_if<judge::Traced>(&message)) {
        have_program = true;
        for (const auto& [name, seconds] : traced->stage_seconds) r.stage_seconds["tracer_" + name] = seconds;
        trace_limit.Measure();
        r.stage_seconds["tracer_cpu"] = trace_limit.cpu_used();
        continue;
      }
    if (read == PallasWorker::Read::kTimeout) {
      tracer.Kill();
      return Stop{Status::kTimeout, Stage::kCompile,
                  "the candidate's import and tracing did not finish " + LimitPassed(trace_limit, passed)};
    }
    if (read == PallasWorker::Read::kClosed)
      return Died(tracer, r, Stage::kCompile, "while the candidate was imported and traced");
    if (read == PallasWorker::Read::kGarbled) {
      tracer.Kill();
      return Stop{Status::kCrashed, Stage::kCompile,
                  "the tracer's report channel carried something that is not a message: " + tracer.garbled};
    }
    if (const auto* result = std::get_if<judge::Result>(&message)) {
      CopyDiagnostics(*result, r);
      return Stop{TracerStatus(result->status), Stage::kCompile, result->message};
    }
    return Stop{Status::kCrashed, Stage::kCompile, "unexpected tracer message '" + judge::KindOf(message) + "'"};
  }

  // The tracer is done: its process ends (or is killed) before its program is read, so that
  // nothing of the candidate runs while the program crosses into the judge's folder (the runner
  // copies it: the two processes share no folder). Read through a descriptor opened without
  // following links: the tracer's folder is the candidate's to write, and a link there would
  // point this process (outside every sandbox) at a file of the host of the candidate's choosing.
  tracer.Finish(After(2));
  // It said it traced, but held too much on its way out (the watchdog ended it): the candidate's
  // doing, whatever the program it wrote.
  if (tracer.resident_exceeded())
    return Stop{Status::kCrashed, Stage::kCompile, tracer.resident_verdict() + " after it traced the candidate"};
  std::string program, why_not;
  if (!ReadTracedProgram(program_in_tracer, std::size_t{256} << 20, program, why_not))
    return Stop{Status::kRejected, Stage::kCompile, why_not};
  std::ofstream out(judge.job_dir / "program.pkl", std::ios::binary | std::ios::trunc);
  out << program;
  if (!out.flush())
    return Stop{Status::kInternalError, Stage::kCompile, "cannot copy the traced program to the judge's folder"};
  RecordResidentPeak(&tracer, r);
  e.tracer.reset();  // its fork server is free for the next evaluation
  if (!judge.Send(judge::Artifact{"program.pkl"}))
    return Died(judge, r, Stage::kCompile, "before it read the traced program");
  return std::nullopt;
}

// 3. The judge checks, compiles, estimates and runs the program; its progress moves the deadline.
// Its last word's facts (stage times, the compile's, diagnostics) are recorded whatever it says.
StageOutcome AwaitJudgeResult(Evaluation& e) {
  EvalResult& r = e.result;
  PallasWorker& judge = *e.judge;
  Stage stage = Stage::kCompile;
  CpuLimit limit = LimitFor(e, judge, e.compile_timeout);
  double cpu_before = 0;  // the judge's CPU seconds under earlier limits
  // What each limit left, for the record: the CPU time of the compile (up to "compiled"), of the
  // estimate (up to the first trial) and the most of any trial's.
  std::string window = "judge_cpu_compile";
  judge::Message message;
  CpuLimit::Passed passed = CpuLimit::Passed::kNone;
  for (;;) {
    const PallasWorker::Read read = NextUnderLimits({{&judge, &limit}}, message, passed).second;
    if (read == PallasWorker::Read::kTimeout) {
      judge.Kill();
      return Stop{Status::kTimeout, stage,
                  "the candidate did not finish " + std::string(StageName(stage)) + " " + LimitPassed(limit, passed)};
    }
    // From here the judge works on the candidate's program: its death is the program's doing.
    if (read == PallasWorker::Read::kClosed) return Died(judge, r, stage, "while it ran the candidate's program");
    if (read == PallasWorker::Read::kGarbled) {
      judge.Kill();
      return Stop{Status::kInternalError, stage,
                  "the judge's report channel carried something that is not a message: " + judge.garbled};
    }
    if (const auto* progress = std::get_if<judge::Progress>(&message)) {
      // The first run after the compile carries its own compile (jit, interpret mode) too, and so
      // does the full-size sample (its rewritten call is compiled afresh, and it runs the starter).
      const bool sample = progress->stage == "full_size_sample";
      const bool first = progress->stage == "compiled" || sample || (progress->trial == 0 && progress->repeat == 0);
      limit.Measure();
      cpu_before += limit.cpu_used();
      r.stage_seconds[window] = std::max(r.stage_seconds[window], limit.cpu_used());
      window = progress->stage == "compiled" ? "judge_cpu_estimate"
               : sample                      ? "judge_cpu_full_size_sample"
                                             : "judge_cpu_trial_max";
      if (progress->stage == "compiled" || progress->stage == "trial") stage = Stage::kCorrectness;
      if (progress->stage == "trial") e.program_ran = true;
      limit = LimitFor(e, judge, e.call_timeout + (first ? e.compile_timeout : 0));
      continue;
    }
    if (const auto* asked = std::get_if<judge::CompileKey>(&message)) {
      if (StageOutcome stop = AnswerCompileKey(e, *asked)) return stop;
      continue;
    }
    if (const auto* compiled = std::get_if<judge::CompileFacts>(&message)) {
      if (StageOutcome stop = KeepCompileFacts(e, *compiled)) return stop;
      continue;
    }
    if (auto* result = std::get_if<judge::Result>(&message)) {
      e.judged = std::move(*result);
      limit.Measure();
      r.stage_seconds[window] = std::max(r.stage_seconds[window], limit.cpu_used());
      r.stage_seconds["judge_cpu"] = cpu_before + limit.cpu_used();
      break;
    }
    judge.Kill();
    return Stop{Status::kInternalError, stage, "unexpected judge message '" + judge::KindOf(message) + "'"};
  }
  for (const auto& [name, seconds] : e.judged.stage_seconds) r.stage_seconds[name] = seconds;
  CopyDiagnostics(e.judged, r);
  if (JudgeFailed(e) && e.judged.timing) r.timing_note = e.judged.timing->reason;
  return std::nullopt;
}

// 4. The judge refused the traced program (its load or its structure check).
StageOutcome StructureStage(Evaluation& e) {
  if (JudgeFailed(e) && e.judged.status == "rejected") return JudgeFailure(e);
  return std::nullopt;
}

// 5. The TPU compile: its facts (memory, time) whatever came after; its failure.
StageOutcome CompileStage(Evaluation& e) {
  EvalResult& r = e.result;
  if (const auto& c = e.judged.tpu_compile) {
    r.stage_seconds["tpu_compile"] = c->seconds;
    for (const auto& [name, bytes] : c->memory) r.estimates["tpu_" + name] = bytes;
    r.estimates["tpu_compile_deviceless"] = c->deviceless ? 1 : 0;
  }
  if (JudgeFailed(e) && ParseStage(e.judged.stage) == Stage::kCompile) return JudgeFailure(e);
  return std::nullopt;
}

// 6. The estimator's figures for the candidate beside the reference's: recorded, not yet judged.
StageOutcome EstimateStage(Evaluation& e) {
  EvalResult& r = e.result;
  if (const auto& ref = e.reference_estimate) {
    r.estimates["reference_flops"] = ref->flops;
    r.estimates["reference_bytes_accessed"] = ref->bytes_accessed;
    if (ref->xla_model_us > 0) r.estimates["reference_xla_model_us"] = ref->xla_model_us;
  }
  if (JudgeFailed(e) || !e.judged.estimate) return std::nullopt;
  const judge::CandidateEstimate& candidate = *e.judged.estimate;
  r.estimate = EstimateOf(candidate, e.options.estimates ? e.reference_estimate : std::nullopt);
  r.estimates["candidate_mosaic_cycles"] = candidate.mosaic_cycles;
  r.estimates["candidate_xla_us"] = candidate.xla_us;
  for (const judge::KernelProfile& k : candidate.kernels) {
    TpuKernelProfile profile;
    profile.kernel = k.kernel;
    profile.grid_steps = k.grid_steps;
    profile.bundles_per_step = k.bundles_per_step;
    profile.estimated_cycles = k.estimated_cycles;
    profile.critical_path_cycles = k.critical_path_cycles;
    profile.unit_share = k.unit_share;
    r.tpu_profile.push_back(std::move(profile));
  }
  return std::nullopt;
}

// 7. Correctness: the judge's own failure (a crash, a race, a wrong count of outputs), else the
// outputs compared here.
StageOutcome CorrectnessStage(Evaluation& e) {
  if (JudgeFailed(e)) return JudgeFailure(e);
  return CompareOutputs(e.judged.trials, e.judge->job_dir, e.expected, e.seeds, e.result);
}

// 8. Timing: the TPU's own clock, where there is one.
StageOutcome TimingStage(Evaluation& e) {
  if (e.judged.timing) ReadTiming(*e.judged.timing, e.options.timing, e.result);
  return std::nullopt;
}

}  // namespace kernelgym
