#include "tpu_runner/cpu/harness_session.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <random>

#include "core/subprocess.h"
#include "core/text_safety.h"
#include "tpu_runner/correctness.h"
#include "tpu_runner/cpu/harness_protocol.h"
#include "tpu_runner/cpu/inputs.h"
#include "tpu_runner/machine.h"
#include "tpu_runner/sandbox.h"

namespace kernelgym {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kControlFd = 3, kReportFd = 4;

std::string Demangle(const std::string& name) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : name;
  std::free(demangled);
  return out;
}

std::string IndexText(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

// The size sets correctness is checked on, the timed one first (a kernel that hard-codes the
// timed shape fails on the others).
std::vector<ShapeSetJob> ShapeSetsToCheck(const Task& task) {
  std::vector<ShapeSetJob> sets;
  for (ShapeSet& shapes : CorrectnessShapeSets(task))
    sets.push_back({std::move(shapes.sizes), std::move(shapes.inputs), std::move(shapes.outputs), {}});
  return sets;
}

constexpr std::size_t kMaxStderrBytes = 2000;

// How many trials each checked size set other than the timed one gets.
constexpr std::size_t kTrialsPerCheckedShapeSet = 2;

std::string SizesText(const std::vector<SizeParam>& sizes) {
  std::string text;
  for (const SizeParam& s : sizes) text += (text.empty() ? "" : ", ") + s.name + "=" + std::to_string(s.value);
  return text;
}

std::string DescribeMismatch(const OutputCheck& c) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%lld of %lld elements mismatch (first at %s: expected %.9g, got %.9g; max abs error %.3g)",
                static_cast<long long>(c.mismatches), static_cast<long long>(c.elements),
                IndexText(c.first_mismatch_index).c_str(), c.expected, c.actual, c.max_abs_error);
  return std::string("output `") + c.output + "`: " + buf;
}

// What the harness is doing now, and how long it may take before the watchdog kills it.
struct Phase {
  std::string name = "start";
  int trial = -1;
  double seconds = 0;  // the phase's wall-clock allowance
  Clock::time_point deadline;
};

class Session {
 public:
  Session(const Task& task, const std::filesystem::path& shared_object, std::unique_ptr<HarnessProcess> process,
          const EvalOptions& options)
      : task_(task), shared_object_(shared_object), process_(std::move(process)), options_(options) {}

  HarnessRun Run() {
    if (Start()) Loop();
    Finish();
    return std::move(run_);
  }

 private:
  bool Start() {
    run_.protections = NamespaceProtections();
    if (!process_) {
      Fail(Status::kInternalError, "no harness process");
      return false;
    }
    control_fd_ = process_->control_fd;
    report_fd_ = process_->report_fd;
    // The kernel enters the harness's view through its slot (a hard link when the cache and the
    // slot share a filesystem, else a copy).
    std::error_code ec;
    const std::filesystem::path target = process_->slot_dir / "kernel.so";
    std::filesystem::remove(target, ec);
    std::filesystem::create_hard_link(shared_object_, target, ec);
    if (ec) std::filesystem::copy_file(shared_object_, target, ec);
    if (ec) {
      Fail(Status::kInternalError, "cannot place the kernel in the harness slot: " + ec.message());
      return false;
    }

    HarnessJob job;
    job.threads = task_.threads;
    job.reference_source = task_.reference_source;
    std::mt19937_64 rng(std::random_device{}());
    // The timed sizes first, with the task's trials (or the caller's seeds); then every other
    // size set the task checks, with two trials each. The seeds are ours, never the policy's.
    for (ShapeSetJob set : ShapeSetsToCheck(task_)) {
      if (job.shape_sets.empty()) {
        set.seeds = options_.seeds;
        while (static_cast<int>(set.seeds.size()) < task_.trials) set.seeds.push_back(rng());
      } else {
        // Derived from the caller's seeds when it chose them (a server's episode is then
        // reproducible to the last trial), else drawn here like the others.
        const uint64_t set_index = job.shape_sets.size();
        for (uint64_t t = 0; t < kTrialsPerCheckedShapeSet; ++t)
          set.seeds.push_back(options_.seeds.empty() ? rng() : MixSeed(options_.seeds.front(), 7727 * set_index + t));
      }
      for (uint64_t seed : set.seeds) run_.correctness.seeds.push_back(seed);
      for (std::size_t t = 0; t < set.seeds.size(); ++t) trial_shape_set_.push_back(static_cast<int>(job.shape_sets.size()));
      job.shape_sets.push_back(std::move(set));
    }
    job.timing_seed = options_.timing_seed ? options_.timing_seed : rng();
    job.timing = options_.timing;
    job.run_timing = options_.run_timing;
    job.kernel_path = process_->slot_in_sandbox + "/kernel.so";
    job.libraries = task_.policy.allowed_libraries;
    // A uid of its own per runner process (RLIMIT_NPROC counts per uid). Only inside bwrap: the
    // files the executor opens are bound there readable for anyone; outside, they may sit in a
    // private home directory.
    job.sandbox_uid = geteuid() == 0 && ProbeSandbox().bwrap ? 61000 + static_cast<uint32_t>(getpid() % 4000) : 0;
    // Timing pins to the timing CPUs (under the host's lock); a correctness-only session stays
    // off them, where compiles run, so that it cannot disturb another runner's timing window.
    job.cpus = options_.run_timing ? TimingCpus(task_.threads) : NonTimingCpus(task_.threads);
    job.cpu_seconds = 120 + 4 * options_.timing.budget_seconds * task_.threads;
    job.address_space = options_.memory_bytes;
    job.max_call_seconds = options_.call_timeout_seconds;
    job.min_call_seconds = std::min(1.0, options_.call_timeout_seconds);
    expected_.assign(trial_shape_set_.size(), std::vector<std::string>(task_.outputs.size()));
    received_.assign(trial_shape_set_.size(), 0);
    repeat_received_.assign(trial_shape_set_.size(), 0);
    first_trial_of_set_.assign(job.shape_sets.size(), -1);
    for (std::size_t t = trial_shape_set_.size(); t-- > 0;) first_trial_of_set_[trial_shape_set_[t]] = static_cast<int>(t);
    for (const ShapeSetJob& set : job.shape_sets) {
      shape_set_text_.push_back(SizesText(set.sizes));
      shape_set_outputs_.push_back(set.outputs);
    }
    SetPhase("trusted", -1, 60);
    // A harness that cannot take its job has exited (or is exiting): Finish() waits for it and
    // says how it ended — the exit status or signal is what tells a broken install apart.
    if (!WriteAll(control_fd_, EncodeFrame({FrameKind::kJob, JobToJson(job), {}}))) return false;
    return true;
  }

  void SetPhase(const std::string& name, int trial, double seconds) {
    phase_.name = name;
    phase_.trial = trial;
    phase_.seconds = seconds;
    phase_.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  std::string TrialText(int trial) const {
    std::string text = "correctness trial " + std::to_string(trial);
    if (trial >= 0 && static_cast<std::size_t>(trial) < trial_shape_set_.size())
      text += " (sizes " + shape_set_text_[trial_shape_set_[trial]] + ")";
    return text;
  }

  std::string Where() const {
    if (phase_.name == "trial") return TrialText(phase_.trial);
    if (phase_.name == "repeat") return "the repeat call of " + TrialText(phase_.trial);
    if (phase_.name == "trusted") return "reference setup (before the kernel was loaded)";
    if (phase_.name == "confine") return "loading the kernel";
    return phase_.name;
  }

  bool CandidatePhase() const { return phase_.name != "trusted" && phase_.name != "start"; }

  void Fail(Status status, std::string message, Stage stage = Stage::kCorrectness) {
    if (decided_) return;
    decided_ = true;
    run_.status = status;
    run_.stage = stage;
    run_.message = std::move(message);
  }

  void Loop() {
    FrameDecoder decoder;
    char buf[1 << 16];
    bool eof = false;
    while (!decided_ && !done_ && !eof) {
      const auto now = Clock::now();
      if (now >= phase_.deadline) {
        process_->child->Kill();
        if (CandidatePhase())
          Fail(Status::kTimeout, "the kernel did not return within its time limit (" + Seconds(phase_.seconds) + " wall clock) during " + Where(),
               phase_.name == "timing" ? Stage::kTiming : Stage::kCorrectness);
        else
          Fail(Status::kInternalError, "the harness did not finish " + Where() + " in time");
        break;
      }
      HarnessChild& child = *process_->child;
      pollfd fds[3] = {{report_fd_, POLLIN, 0}, {child.stdout_fd(), POLLIN, 0}, {child.stderr_fd(), POLLIN, 0}};
      const int wait_ms = static_cast<int>(std::min<long long>(
          200, std::chrono::duration_cast<std::chrono::milliseconds>(phase_.deadline - now).count() + 1));
      poll(fds, 3, wait_ms);
      child.DrainOutput();
      for (;;) {
        const ssize_t n = read(report_fd_, buf, sizeof(buf));
        if (n > 0) {
          decoder.Feed(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0) eof = true;
        break;
      }
      while (!decided_ && !done_) {
        std::optional<Frame> frame = decoder.Next();
        if (!frame) break;
        try {
          Handle(*frame);
        } catch (const json::exception& e) {
          Fail(Status::kInternalError, "harness protocol: malformed frame (kind " +
                                           std::to_string(static_cast<int>(frame->kind)) + "): " + e.what());
        }
      }
      if (!decoder.error().empty()) Fail(Status::kInternalError, "harness report stream: " + decoder.error());
    }
  }

  // The timing loop runs its warm-up rounds and at least 6 measured rounds (a reference and a
  // kernel call each) even past its budget: a kernel whose calls stay under the per-call limit
  // always finishes.
  double TimingLimit() const {
    // Four calls a round (an untimed and a timed one per side), each cut by the harness at its
    // call limit; this deadline is only the backstop for a harness that stopped answering.
    const double call = std::min(options_.call_timeout_seconds, 11 * call_limit_seconds_ + 1);
    return options_.timing.budget_seconds + (options_.timing.warmup_rounds + 7) * 4 * call + 5;
  }

  static std::string Seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g s", s);
    return buf;
  }

  uint64_t FullMask() const {
    const std::size_t n = std::min<std::size_t>(task_.outputs.size(), 63);
    return n == 0 ? 0 : (n == 63 ? ~0ULL >> 1 : (1ULL << n) - 1);
  }

  // The trials are the runner's: every one of them, and the repeat of each shape set's first,
  // must have been seen with every output before anything counts as correct.
  bool AllTrialsArrived() {
    for (std::size_t t = 0; t < received_.size(); ++t) {
      const bool first = static_cast<int>(t) == first_trial_of_set_[trial_shape_set_[t]];
      if (received_[t] != FullMask() || (first && repeat_received_[t] != FullMask())) {
        Fail(Status::kIncorrect, "the outputs of " + TrialText(static_cast<int>(t)) + (received_[t] == FullMask() ? "'s repeat call" : "") +
                                     " never arrived: a trial that is not seen is not passed");
        return false;
      }
    }
    return true;
  }

  void Handle(const Frame& f) {
    switch (f.kind) {
      case FrameKind::kExpected: {
        const std::size_t trial = f.meta.value("trial", 0u), output = f.meta.value("output", 0u);
        if (trusted_done_ || trial >= expected_.size() || output >= task_.outputs.size()) {
          Fail(Status::kInternalError, "harness protocol: unexpected reference output frame");
          return;
        }
        expected_[trial][output] = f.data;
        return;
      }
      case FrameKind::kEvent: {
        const std::string phase = f.meta.value("phase", std::string());
        const int trial = f.meta.value("trial", -1);
        if (phase == "warm") {  // the reference has loaded libtorch (AwaitWarm waited for it)
          // "loaded CPU_SECONDS": what getting there cost the reference's process (~0 forked warm).
          const std::string line = f.meta.value("reference", std::string());
          if (line.rfind("loaded ", 0) == 0) run_.reference_start_cpu_seconds = std::atof(line.c_str() + 7);
          return;
        }
        if (phase == "trial" || phase == "repeat") {
          if (correctness_start_ == Clock::time_point{}) correctness_start_ = Clock::now();
          // The harness cuts a call at its limit; this is the backstop.
          SetPhase(phase, trial, std::min(options_.call_timeout_seconds, 11 * call_limit_seconds_ + 1) + 5);
        } else if (phase == "timing") {
          SetPhase(phase, -1, TimingLimit());
        } else {
          SetPhase(phase, -1, phase == "trusted" ? 60 : phase == "confine" ? 2 * options_.call_timeout_seconds + 10 : options_.call_timeout_seconds + 5);
        }
        return;
      }
      case FrameKind::kTrustedDone: {
        trusted_done_ = true;
        run_.reference_alone_ns = f.meta.value("reference_alone_ns", 0.0);
        call_limit_seconds_ = f.meta.value("call_limit_seconds", options_.call_timeout_seconds);
        const json protections = f.meta.value("protections", json::object());
        for (const auto& [name, on] : protections.items()) run_.protections[name] = on.get<bool>();
        return;
      }
      case FrameKind::kTrialOutput: return HandleTrialOutput(f);
      case FrameKind::kAfterReturn:
        if (f.meta.value("changed", false)) {
          Fail(Status::kIncorrect, "the outputs changed after kernel() returned: work continued in the background");
          return;
        }
        if (f.meta.value("ran", false)) {
          // The same finding as the per-call check (ran_between_calls), named the same: on a busy
          // machine a thread that burns CPU between calls may get too little of it during the
          // trials to cross that check's slack, and is caught here instead.
          Fail(Status::kIncorrect, "the kernel's process ran while it was not being called (" +
                                       std::to_string(static_cast<long long>(f.meta.value("idle_cpu_ns", 0.0) / 1e3)) +
                                       " us of CPU time in a 20 ms pause after its last call returned): work continued "
                                       "in the background");
          return;
        }
        if (!AllTrialsArrived()) return;
        run_.correctness_seconds = std::chrono::duration<double>(Clock::now() - correctness_start_).count();
        if (!options_.run_timing) return;
        if (!WriteAll(control_fd_, EncodeFrame({FrameKind::kProceed, json::object(), {}})))
          Fail(Status::kInternalError, "could not tell the harness to proceed");
        SetPhase("timing-start", -1, 10);
        return;
      case FrameKind::kTiming: return HandleTiming(f);
      case FrameKind::kCounters: {
        const json counters = f.meta.value("counters", json::object());
        for (const auto& [name, value] : counters.items()) run_.counters[name] = value.get<double>();
        run_.unavailable_counters = f.meta.value("unavailable", std::vector<std::string>{});
        return;
      }
      case FrameKind::kViolation: return HandleViolation(f);
      case FrameKind::kFatal:
        Fail(Status::kInternalError, "the harness failed: " + f.meta.value("message", std::string("?")));
        return;
      case FrameKind::kDone:
        if (!AllTrialsArrived()) return;
        done_ = true;
        return;
      default:
        Fail(Status::kInternalError, "harness protocol: unexpected frame kind " + std::to_string(static_cast<int>(f.kind)));
    }
  }

  void HandleTrialOutput(const Frame& f) {
    const std::size_t trial = f.meta.value("trial", 0u), output = f.meta.value("output", 0u);
    const int call = f.meta.value("call", 0);
    if (!trusted_done_ || trial >= expected_.size() || output >= task_.outputs.size()) {
      Fail(Status::kInternalError, "harness protocol: unexpected candidate output frame");
      return;
    }
    const int shape_set = trial_shape_set_[trial];
    const TensorSpec& spec = shape_set_outputs_[shape_set][output];
    auto bytes = [](const std::string& s) { return std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size()); };
    if (f.data.size() != spec.NumBytes() || expected_[trial][output].size() != spec.NumBytes()) {
      Fail(Status::kInternalError, "harness protocol: output `" + spec.name + "` of trial " + std::to_string(trial) + " has the wrong size");
      return;
    }
    if (call == 0) {
      received_[trial] |= 1ULL << std::min<std::size_t>(output, 63);
      run_.correctness.trials_run = static_cast<int>(std::count_if(received_.begin(), received_.end(), [&](uint64_t bits) {
        return bits == FullMask();
      }));
      OutputCheck check = CompareOutput(spec, bytes(expected_[trial][output]), bytes(f.data));
      if (static_cast<int>(trial) == first_trial_of_set_[shape_set]) first_outputs_[{shape_set, output}] = f.data;
      auto& checks = run_.correctness.checks;
      if (checks.size() <= output) checks.resize(task_.outputs.size());
      if (checks[output].passed()) checks[output] = check;  // keep the first failure
      if (!check.passed()) {
        std::string message = TrialText(static_cast<int>(trial)) + ": " + DescribeMismatch(check);
        if (check.non_finite > 0) message += "; " + std::to_string(check.non_finite) + " NaN/Inf values (unwritten outputs keep the NaN poison)";
        Fail(Status::kIncorrect, message);
      }
      return;
    }
    // The repeat of a shape set's first trial: same inputs, different poison.
    if (static_cast<int>(trial) != first_trial_of_set_[shape_set] || !first_outputs_.count({shape_set, output})) {
      Fail(Status::kInternalError, "harness protocol: a repeat of trial " + std::to_string(trial) + " was not asked for");
      return;
    }
    repeat_received_[trial] |= 1ULL << std::min<std::size_t>(output, 63);
    const std::string& first = first_outputs_[{shape_set, output}];
    bool same;
    if (task_.threads == 1) {
      same = first == f.data;
    } else {  // multi-threaded reductions may legitimately reorder: hold them to the tolerance
      same = CompareOutput(spec, bytes(first), bytes(f.data)).passed();
    }
    if (!same) {
      run_.correctness.deterministic = false;
      const OutputCheck diff = CompareOutput(TensorSpec{spec.name, spec.dtype, spec.shape, std::nullopt, Tolerance{0, 0}},
                                             bytes(first), bytes(f.data));
      Fail(Status::kIncorrect, "nondeterministic: calling the kernel twice on the same inputs gave different outputs (" +
                                   DescribeMismatch(diff) + ") — it reads uninitialized memory or keeps state between calls");
    }
  }

  void HandleTiming(const Frame& f) {
    for (const json& row : f.meta.value("samples", json::array())) {
      TimingSample s;
      s.reference_ns = row.at(0).get<double>();
      s.candidate_ns = row.at(1).get<double>();
      s.reference_cpu_ns = row.at(2).get<double>();
      s.candidate_cpu_ns = row.at(3).get<double>();
      s.input_set = row.at(4).get<int>();
      s.candidate_first = row.at(5).get<bool>();
      s.discarded = row.at(6).get<bool>();
      run_.samples.push_back(s);
    }
    run_.timing_seconds = f.meta.value("seconds", 0.0);
    if (const auto p = f.meta.find("priority"); p != f.meta.end() && p->is_object()) {
      run_.timing_scheduling = p->value("scheduling", std::string());
      run_.timing_priority_error = p->value("error", std::string());
    }
    const json& mismatch = f.meta["mismatch"];
    if (!mismatch.is_null()) {
      // A NaN or an infinity (unwritten poison) travels as JSON null.
      auto number = [&](const char* key) {
        const json& v = mismatch.contains(key) ? mismatch[key] : json();
        return v.is_number() ? std::to_string(v.get<double>()) : std::string("nan or inf");
      };
      Fail(Status::kIncorrect,
           "timed call " + std::to_string(mismatch.value("round", 0)) + ": output `" + mismatch.value("output", std::string()) +
               "` differs from the reference on fresh inputs (" + std::to_string(mismatch.value("mismatches", 0)) +
               " elements mismatch, first at " + IndexText(mismatch.value("first_mismatch", std::vector<int64_t>{})) + ": expected " +
               number("expected") + ", got " + number("actual") +
               ") — results were cached, the kernel changed behaviour after the correctness trials, or its outputs were "
               "not finished when it said `done` (the outputs are taken at that moment)",
           Stage::kTiming);
    }
  }

  void HandleViolation(const Frame& f) {
    const std::string kind = f.meta.value("kind", std::string());
    const std::string what = f.meta.value("message", std::string());
    const long long value = f.meta.value("value", 0LL);
    const Stage stage = phase_.name == "timing" ? Stage::kTiming : Stage::kCorrectness;
    if (!CandidatePhase()) {
      Fail(Status::kInternalError, "the reference crashed before the kernel was loaded (" + kind + ": " + what + ")");
      return;
    }
    char addr[32];
    std::snprintf(addr, sizeof(addr), "0x%llx", static_cast<unsigned long long>(value));
    if (kind == "seccomp") {
      Fail(Status::kSandboxViolation, "the kernel made a forbidden system call: " + what + " (" + std::to_string(value) +
                                          ") during " + Where(), stage);
    } else if (kind == "input_write") {
      Fail(Status::kIncorrect, "the kernel wrote to input `" + what + "`, which is read-only (at " + addr + ") during " + Where(), stage);
    } else if (kind == "out_of_bounds") {
      Fail(Status::kCrashed, "the kernel accessed memory past the end of `" + what + "` (SIGSEGV at " + addr + ") during " + Where(), stage);
    } else if (kind == "signal") {
      std::string message = "the kernel crashed with " + what + " (address " + addr + ") during " + Where();
      if (what == "SIGSEGV" && value >= 0 && value < 65536)
        message += "; a null pointer dereference — did an allocation fail under the " +
                   std::to_string(options_.memory_bytes >> 30) + " GiB address-space limit?";
      Fail(Status::kCrashed, message, stage);
    } else if (kind == "terminate") {
      Fail(Status::kCrashed, "the kernel threw an uncaught C++ exception (" + Demangle(what) + ") during " + Where() +
                                 (what.find("bad_alloc") != std::string::npos
                                      ? "; the address-space limit is " + std::to_string(options_.memory_bytes >> 30) + " GiB"
                                      : ""),
           stage);
    } else if (kind == "exit") {
      Fail(Status::kCrashed, "the kernel called exit() during " + Where(), stage);
    } else if (kind == "exited") {
      Fail(Status::kCrashed, what + " during " + Where() + ": the kernel ended its own process", stage);
    } else if (kind == "call_time_limit") {
      Fail(Status::kTimeout, "the kernel's call did not return within its limit of " + what + " during " + Where(), stage);
    } else if (kind == "cpu_limit") {
      Fail(Status::kTimeout, "the kernel hit " + what + " during " + Where(), stage);
    } else if (kind == "ran_between_calls") {
      Fail(Status::kIncorrect, "the kernel's process ran while it was not being called (" + what + ") during " + Where() +
                                   ": a thread kept working after kernel() returned, which would steal the CPU from the "
                                   "reference or compute the next answer outside the timed call",
           stage);

    } else if (kind == "load") {
      Fail(Status::kCrashed, "the shared object failed to load: " + what, stage);
    } else {
      Fail(Status::kCrashed, "the harness reported " + kind + ": " + what, stage);
    }
  }

  void Finish() {
    if (!process_ || !process_->child) return;  // never started: Start() said why
    HarnessChild& child = *process_->child;
    // After kDone the harness exits by itself; after a verdict it may be blocked (writing more
    // frames, waiting for kProceed): kill it at once, the verdict is already known.
    if (decided_) child.Kill();
    child.Wait(Clock::now() + std::chrono::seconds(5));
    child.Kill();
    child.Wait(Clock::time_point::max());
    // The kernel's own stderr arrives here too (the executor shares the harness's): a few lines,
    // and a bounded number of bytes of them (one 1 MiB line is one line).
    const std::string stderr_head(Utf8Prefix(ValidUtf8(HeadLines(child.stderr_text(), 6)), kMaxStderrBytes));
    if (!stderr_head.empty()) run_.details.push_back("harness stderr: " + stderr_head);
    if (done_ && !decided_) {
      decided_ = true;
      run_.status = Status::kOk;
      run_.stage = options_.run_timing ? Stage::kTiming : Stage::kCorrectness;
      run_.message = "correct";
      return;
    }
    if (decided_) return;
    const Stage stage = phase_.name == "timing" ? Stage::kTiming : Stage::kCorrectness;
    if (child.signal() == SIGXCPU) {
      Fail(Status::kTimeout, "the CPU-time limit was hit during " + Where(), stage);
    } else if (child.signal() != 0) {
      Fail(CandidatePhase() ? Status::kCrashed : Status::kInternalError,
           "the harness was killed by " + SignalName(child.signal()) + " during " + Where(), stage);
    } else if (CandidatePhase()) {
      Fail(Status::kCrashed, "the process ended (exit status " + std::to_string(child.exit_code()) + ") during " + Where() +
                                 " before reporting: the kernel exited or killed it",
           stage);
    } else {
      Fail(Status::kInternalError, "the harness exited with status " + std::to_string(child.exit_code()) + " during " +
                                       Where() + (stderr_head.empty() ? "" : ": " + stderr_head));
    }
  }

  const Task& task_;
  const std::filesystem::path& shared_object_;
  std::unique_ptr<HarnessProcess> process_;
  const EvalOptions& options_;
  HarnessRun run_;
  int control_fd_ = -1, report_fd_ = -1;
  Phase phase_;
  bool decided_ = false, done_ = false, trusted_done_ = false;
  std::vector<std::vector<std::string>> expected_;
  std::map<std::pair<int, std::size_t>, std::string> first_outputs_;  // by (shape set, output)
  // The runner's own count: which trial belongs to which shape set, and which outputs arrived.
  std::vector<int> trial_shape_set_;
  std::vector<int> first_trial_of_set_;
  std::vector<std::vector<TensorSpec>> shape_set_outputs_;
  std::vector<std::string> shape_set_text_;
  std::vector<uint64_t> received_, repeat_received_;  // per trial: a bit per output
  double call_limit_seconds_ = 0;
  Clock::time_point correctness_start_{};
};

}  // namespace

// The environment every harness runs with (the task's thread count only changes numbers).
std::vector<std::string> HarnessEnvironment(int threads) {
  const std::string n = std::to_string(threads);
  return {"PATH=/usr/bin:/bin", "LC_ALL=C", "OMP_NUM_THREADS=" + n, "OMP_THREAD_LIMIT=" + n,
          "OPENBLAS_NUM_THREADS=" + n, "MKL_NUM_THREADS=" + n, "OMP_DYNAMIC=false",
          // Idle OpenMP threads sleep instead of spinning: the reference's and the kernel's take
          // turns on the same CPUs, and a spinning pool would run through the other's call.
          "OMP_WAIT_POLICY=passive",
          // Steady-state allocation for reference and kernel alike: serve blocks up to 32 MiB
          // from the heap and never give memory back, so a timed call does not pay page faults
          // for memory a previous call freed (it did: the reference CV was 20-30%).
          "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"};
}

std::string HarnessToolPath(const std::filesystem::path& tools_dir, const std::string& name) {
  return ProbeSandbox().bwrap ? "/opt/kernelgym/" + name : (tools_dir / name).string();
}

SpawnOptions HarnessSpawnOptions(const std::filesystem::path& tools_dir, const std::filesystem::path& slot,
                                 const std::string& slot_inside, int threads, const std::vector<std::string>& argv) {
  // The judge and the two programs it starts, side by side (the runner finds them in its tools
  // folder; inside the sandbox they are bound read-only under /opt/kernelgym).
  SandboxSpec spec;
  for (const char* name : {"kernelgym-harness", "kernelgym-reference", "kernelgym-executor"})
    spec.binds.push_back({(tools_dir / name).string(), HarnessToolPath(tools_dir, name), false});
  spec.binds.push_back({slot.string(), slot_inside, false});
  spec.keep_setuid_capability = true;
  spec.cpu_info = true;
  SpawnOptions spawn;
  spawn.argv = SandboxCommand(spec, argv);
  spawn.env = HarnessEnvironment(threads);
  // Generous until the job says otherwise (the harness lowers both when it reads it).
  spawn.limits.address_space = std::size_t{16} << 30;
  spawn.limits.cpu_seconds = 3600;
  spawn.limits.open_files = 1024;
  return spawn;
}

HarnessProcess::~HarnessProcess() {
  if (control_fd >= 0) close(control_fd);
  if (report_fd >= 0) close(report_fd);
  if (child) child->Kill();  // no-op when it already exited; reaps it
  std::error_code ec;
  if (!slot_dir.empty()) std::filesystem::remove_all(slot_dir, ec);
}

bool HarnessProcess::Running() { return child && !child->Wait(Clock::now()); }

namespace {

// A harness the runner spawned itself, in a sandbox of its own.
class SpawnedHarness final : public HarnessChild {
 public:
  explicit SpawnedHarness(ChildProcess child) : child_(std::move(child)) {}
  int stdout_fd() const override { return child_.stdout_fd(); }
  int stderr_fd() const override { return child_.stderr_fd(); }
  void DrainOutput() override { child_.DrainOutput(); }
  void Kill() override { child_.Kill(); }
  bool Wait(Clock::time_point deadline) override { return child_.Wait(deadline); }
  int exit_code() const override { return child_.exit_code(); }
  int signal() const override { return child_.signal(); }
  const std::string& stderr_text() const override { return child_.stderr_text(); }

 private:
  ChildProcess child_;
};

}  // namespace

bool HarnessProcess::AwaitWarm(double seconds) const {
  pollfd fd{report_fd, POLLIN, 0};
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int rc = poll(&fd, 1, static_cast<int>(left));
    if (rc > 0) return true;  // a frame, or the end of the pipe (the session says why)
    if (rc < 0 && errno != EINTR) return false;
  }
}

std::unique_ptr<HarnessProcess> StartHarness(const std::filesystem::path& harness_program,
                                             const std::filesystem::path& scratch_root, int threads,
                                             const std::vector<int>& cpus, std::string& error) {
  static std::atomic<uint64_t> counter{0};
  auto process = std::make_unique<HarnessProcess>();
  process->threads = threads;
  std::error_code ec;
  process->slot_dir = scratch_root / ("slot-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(process->slot_dir, ec);
  std::filesystem::permissions(process->slot_dir,
                               std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                   std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                   std::filesystem::perms::others_exec,
                               ec);
  if (ec) {
    error = "cannot create the harness slot " + process->slot_dir.string() + ": " + ec.message();
    return nullptr;
  }
  ChildChannels channels;
  if (!OpenChildChannels(channels, error)) return nullptr;
  int* control = channels.control;
  int* report = channels.report;
  const std::filesystem::path tools = harness_program.parent_path();
  auto inside = [&](const std::string& name) { return HarnessToolPath(tools, name); };
  process->slot_in_sandbox = ProbeSandbox().bwrap ? "/opt/kernelgym/slot" : process->slot_dir.string();
  SpawnOptions spawn = HarnessSpawnOptions(
      tools, process->slot_dir, process->slot_in_sandbox, threads,
      {inside("kernelgym-harness"), "--control-fd", std::to_string(kControlFd), "--report-fd", std::to_string(kReportFd),
       "--reference", inside("kernelgym-reference"), "--executor", inside("kernelgym-executor")});
  spawn.cpus = cpus;
  spawn.pass_fds = {{control[0], kControlFd}, {report[1], kReportFd}};
  ChildProcess child = ChildProcess::Spawn(spawn);
  close(control[0]);
  close(report[1]);
  process->control_fd = control[1];
  process->report_fd = report[0];
  fcntl(process->report_fd, F_SETFL, O_NONBLOCK);
  if (child.pid() <= 0) {
    error = "the harness did not start: " + child.error();
    return nullptr;
  }
  process->child = std::make_unique<SpawnedHarness>(std::move(child));
  return process;
}

int CorrectnessTrialCount(const Task& task) {
  return task.trials + static_cast<int>(kTrialsPerCheckedShapeSet * task.check_sizes.size());
}

HarnessRun RunHarnessSession(const Task& task, const std::filesystem::path& shared_object,
                             std::unique_ptr<HarnessProcess> process, const EvalOptions& options) {
  return Session(task, shared_object, std::move(process), options).Run();
}

}  // namespace kernelgym
