// kernelgym-harness: runs one evaluation's reference and candidate, inside the sandbox.
//
// Phases (the runner's watchdog keys its deadlines on the kEvent frames):
//   trusted    reference compiled, correctness inputs generated, expected outputs sent to the
//              runner, reference timed alone. Nothing untrusted is in the process yet.
//   confine    limits, uid drop, seccomp stage 1, dlopen(candidate), seccomp stage 2.
//   trials     the candidate on each trial's inputs (poisoned outputs, read-only inputs); the
//              runner, not this process, compares the outputs with the expected ones.
//   timing     after the runner says kProceed: reference and candidate interleaved, every
//              timed output checked against the reference's output for the same inputs.
#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <immintrin.h>
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <string>
#include <vector>

#include "tpu_runner/correctness.h"
#include "tpu_runner/harness/arena.h"
#include "tpu_runner/harness/confine.h"
#include "tpu_runner/harness/counters.h"
#include "tpu_runner/harness/kernel_call.h"
#include "tpu_runner/harness/reference.h"
#include "tpu_runner/harness/report.h"
#include "tpu_runner/harness_protocol.h"
#include "tpu_runner/inputs.h"
#include "tpu_runner/timing_stats.h"

namespace kernelgym {
namespace {

using nlohmann::json;

// EstimateMedianRatio needs 6 ratios for a 95% interval.
constexpr int kMinRoundsForInterval = 6;

double NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

[[noreturn]] void Fatal(const std::string& message) {
  Frame f{FrameKind::kFatal, {{"message", message}}, {}};
  report::Send(f);
  _exit(2);
}

void Event(const std::string& phase, int trial = -1) {
  Frame f{FrameKind::kEvent, {{"phase", phase}}, {}};
  if (trial >= 0) f.meta["trial"] = trial;
  report::Send(f);
}

Frame ReadFrame(int fd) {
  FrameDecoder decoder;
  char buf[65536];
  for (;;) {
    if (auto frame = decoder.Next()) return *frame;
    if (!decoder.error().empty()) Fatal("control channel: " + decoder.error());
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0);  // the runner went away or decided to stop: nothing to report
    decoder.Feed(buf, static_cast<std::size_t>(n));
  }
}

// The CPUs and limits of this job. A pre-started harness waited for its job on other CPUs
// (loading libtorch must not disturb a measurement in progress); no thread exists yet but this
// one, so every thread started later (OpenMP, libtorch) inherits the placement.
void ApplyPlacementAndLimits(const HarnessJob& job) {
  if (!job.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : job.cpus) CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) Fatal(std::string("sched_setaffinity: ") + strerror(errno));
  }
  if (job.cpu_seconds > 0) {
    const rlim_t cpu = static_cast<rlim_t>(job.cpu_seconds);
    struct rlimit limit{cpu, cpu};
    setrlimit(RLIMIT_CPU, &limit);
  }
  if (job.address_space > 0) {
    struct rlimit limit{job.address_space, job.address_space};
    setrlimit(RLIMIT_AS, &limit);
  }
}

class Harness {
 public:
  explicit Harness(HarnessJob job) : job_(std::move(job)) {}

  [[noreturn]] void Run() {
    SetUpArena();
    confine::InstallCrashReporters(&arena_);
    Event("trusted");
    counters_ = std::make_unique<Counters>();
    std::string error;
    reference_ = Reference::Create(job_.reference_source, job_.threads, job_.inputs, job_.outputs, error);
    if (!reference_) Fatal(error);
#pragma omp parallel num_threads(job_.threads)
    { /* start the OpenMP pool now, while the process is still trusted */ }
    for (int set = 0; set < 2; ++set) reference_->BindInputs(set, InputViews(set));
    SendExpectedOutputs();
    const double reference_alone_ns = TimeReferenceAlone();

    Confine();
    report::Send({FrameKind::kTrustedDone, {{"reference_alone_ns", reference_alone_ns}, {"protections", confine::Protections()}}, {}});

    RunTrials();
    if (!job_.run_timing) Done();
    const Frame go = ReadFrame(control_fd);
    if (go.kind != FrameKind::kProceed) _exit(0);
    RunTiming();
    Done();
  }

  int control_fd = -1;

 private:
  std::size_t NumInputs() const { return job_.inputs.size(); }
  const ArenaBuffer& Input(int set, std::size_t i) const { return arena_.buffers()[set * NumInputs() + i]; }
  const ArenaBuffer& Output(int set, std::size_t o) const {
    return arena_.buffers()[2 * NumInputs() + set * job_.outputs.size() + o];
  }
  std::vector<std::span<std::byte>> InputViews(int set) const {
    std::vector<std::span<std::byte>> v;
    for (std::size_t i = 0; i < NumInputs(); ++i) v.push_back(Input(set, i).view());
    return v;
  }

  void SetUpArena() {
    std::vector<std::pair<std::string, std::size_t>> inputs, outputs;
    for (int set = 0; set < 2; ++set) {
      for (const auto& t : job_.inputs) inputs.push_back({t.name, t.NumBytes()});
      for (const auto& t : job_.outputs) outputs.push_back({t.name, t.NumBytes()});
    }
    if (!arena_.Create(inputs, outputs)) Fatal("arena: " + arena_.error());
    if (job_.inputs.size() + job_.outputs.size() + job_.sizes.size() > kMaxKernelArgs)
      Fatal("the signature has more than " + std::to_string(kMaxKernelArgs) + " arguments");
  }

  void FillSet(int set, uint64_t seed) {
    for (std::size_t i = 0; i < NumInputs(); ++i) FillInput(job_.inputs[i], Input(set, i).alias(), MixSeed(seed, i));
  }

  void RunReference(int set) {
    reference_->ResetThreads();
    std::string error;
    if (!reference_->Run(set, error)) Fatal(error);
  }

  void SendExpectedOutputs() {
    for (std::size_t t = 0; t < job_.seeds.size(); ++t) {
      const int set = static_cast<int>(t % 2);
      FillSet(set, job_.seeds[t]);
      RunReference(set);
      std::vector<std::string> expected(job_.outputs.size());
      std::vector<std::span<std::byte>> spans;
      for (std::size_t o = 0; o < job_.outputs.size(); ++o) {
        expected[o].resize(job_.outputs[o].NumBytes());
        spans.push_back({reinterpret_cast<std::byte*>(expected[o].data()), expected[o].size()});
      }
      reference_->TakeOutputs(spans);
      // The answers leave this process; no copy of them stays behind.
      for (std::size_t o = 0; o < job_.outputs.size(); ++o)
        report::SendAndWipe({FrameKind::kExpected, {{"trial", t}, {"output", o}}, std::move(expected[o])});
    }
  }

  // The reference's speed before any candidate code exists in the process: the baseline that
  // shows whether a kernel slowed the reference down when they share the process.
  double TimeReferenceAlone() {
    std::vector<double> times;
    const double start = NowNs(CLOCK_MONOTONIC);
    for (int i = 0; i < 200; ++i) {
      reference_->ResetThreads();
      const double t0 = NowNs(CLOCK_MONOTONIC);
      std::string error;
      if (!reference_->Run(0, error)) Fatal(error);
      const double t1 = NowNs(CLOCK_MONOTONIC);
      if (i >= 3) times.push_back(t1 - t0);
      if (i >= 12 && t1 - start > 0.05e9) break;  // informational: keep it short
    }
    return Percentile(times, 0.5);
  }

  void Confine() {
    Event("confine");
    confine::TightenLimits(job_.threads);
    confine::Protections()["unprivileged_uid"] = confine::DropPrivileges(job_.sandbox_uid);
    std::string error;
    const bool stage1 = confine::InstallStage1(arena_, report::fd(), report::cookie(), error);
    if (!stage1) Fatal(error);
    void* handle = dlopen(job_.kernel_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      report::SendViolation("load", why ? why : "dlopen failed", 0);
      _exit(106);
    }
    kernel_ = dlsym(handle, "kernel");
    if (!kernel_) {
      report::SendViolation("load", "the shared object has no `kernel`", 0);
      _exit(106);
    }
    const bool stage2 = confine::InstallStage2(error);
    if (!stage2) Fatal(error);
    confine::Protections()["seccomp"] = stage1 && stage2;
    confine::Protections()["readonly_inputs"] = true;
    confine::Protections()["output_guard_pages"] = true;
  }

  std::vector<uint64_t> Args(int set) const {
    std::vector<uint64_t> args;
    for (std::size_t i = 0; i < NumInputs(); ++i) args.push_back(reinterpret_cast<uint64_t>(Input(set, i).data));
    for (std::size_t o = 0; o < job_.outputs.size(); ++o) args.push_back(reinterpret_cast<uint64_t>(Output(set, o).data));
    for (const auto& s : job_.sizes) args.push_back(static_cast<uint64_t>(s.value));
    return args;
  }

  void PoisonOutputs(int set, int variant) {
    for (std::size_t o = 0; o < job_.outputs.size(); ++o) FillPoison(job_.outputs[o].dtype, Output(set, o).view(), variant);
  }

  // The candidate may change the floating-point environment (flush-to-zero, rounding); it must
  // not leak into the reference.
  void CallCandidate(const std::vector<uint64_t>& args) {
    const unsigned int csr = _mm_getcsr();
    CallKernel(kernel_, args);
    _mm_setcsr(csr);
  }

  void SendOutputs(int set, int trial, int call) {
    for (std::size_t o = 0; o < job_.outputs.size(); ++o) {
      const ArenaBuffer& b = Output(set, o);
      report::Send({FrameKind::kTrialOutput, {{"trial", trial}, {"output", o}, {"call", call}},
                    std::string(reinterpret_cast<const char*>(b.data), b.bytes)});
    }
  }

  void RunTrials() {
    int last_set = 0;
    for (std::size_t t = 0; t < job_.seeds.size(); ++t) {
      const int set = static_cast<int>(t % 2);
      last_set = set;
      FillSet(set, job_.seeds[t]);
      PoisonOutputs(set, 0);
      Event("trial", static_cast<int>(t));
      CallCandidate(Args(set));
      SendOutputs(set, static_cast<int>(t), 0);
      if (t == 0) {  // same inputs, different poison: must give the same bits
        PoisonOutputs(set, 1);
        Event("repeat", 0);
        CallCandidate(Args(set));
        SendOutputs(set, 0, 1);
      }
    }
    // Work left running after return (a thread, an async task) shows up as outputs that keep
    // changing after kernel() came back.
    std::vector<std::string> snapshot;
    for (std::size_t o = 0; o < job_.outputs.size(); ++o)
      snapshot.emplace_back(reinterpret_cast<const char*>(Output(last_set, o).data), Output(last_set, o).bytes);
    timespec pause{0, 20'000'000};
    nanosleep(&pause, nullptr);
    bool changed = false;
    for (std::size_t o = 0; o < job_.outputs.size(); ++o)
      changed = changed || std::memcmp(snapshot[o].data(), Output(last_set, o).data, Output(last_set, o).bytes) != 0;
    report::Send({FrameKind::kAfterReturn, {{"changed", changed}}, {}});
  }

  void RunTiming() {
    Event("timing");
    const TimingOptions& opt = job_.timing;
    for (int set = 0; set < 2; ++set) FillSet(set, MixSeed(job_.timing_seed, 1000 + set));
    std::vector<std::vector<std::byte>> reference_out(job_.outputs.size());
    std::vector<std::span<std::byte>> reference_spans;
    for (std::size_t o = 0; o < job_.outputs.size(); ++o) {
      reference_out[o].resize(job_.outputs[o].NumBytes());
      reference_spans.push_back(reference_out[o]);
    }
    const std::vector<uint64_t> args[2] = {Args(0), Args(1)};
    Rng mask_keys(job_.cookie ^ 0x6d61736b6b657973ULL);
    std::vector<TimingSample> samples;
    json mismatch;
    bool converged = false;
    int candidate_calls = 0;
    const double start = NowNs(CLOCK_MONOTONIC);
    for (int round = 0;; ++round) {
      const int set = round % 2;
      if (opt.refresh_inputs && round >= 2)
        for (std::size_t i = 0; i < NumInputs(); ++i)
          RefreshInput(job_.inputs[i], Input(set, i).alias(), MixSeed(job_.timing_seed, 7919ULL * round + i), 1.0 / 32);
      const uint64_t mask_key = mask_keys.Next() | 1;
      TimingSample s;
      s.input_set = set;
      s.candidate_first = round % 4 == 1 || round % 4 == 2;  // ABBA: order effects cancel
      auto time_reference = [&] {
        reference_->ResetThreads();
        const double w0 = NowNs(CLOCK_MONOTONIC), c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
        std::string error;
        const bool ok = reference_->Run(set, error);
        const double c1 = NowNs(CLOCK_THREAD_CPUTIME_ID), w1 = NowNs(CLOCK_MONOTONIC);
        if (!ok) Fatal(error);
        // While the kernel runs, the reference's answer for these very inputs is in this
        // process: keep it masked, so that finding and copying it is not a shortcut.
        reference_->TakeOutputs(reference_spans);
        Mask(reference_out, mask_key);
        s.reference_ns = w1 - w0;
        s.reference_cpu_ns = c1 - c0;
      };
      auto time_candidate = [&] {
        PoisonOutputs(set, 0);
        counters_->Enable();
        const unsigned int csr = _mm_getcsr();
        const double w0 = NowNs(CLOCK_MONOTONIC), c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
        CallKernel(kernel_, args[set]);
        const double c1 = NowNs(CLOCK_THREAD_CPUTIME_ID), w1 = NowNs(CLOCK_MONOTONIC);
        _mm_setcsr(csr);
        counters_->Disable();
        ++candidate_calls;
        s.candidate_ns = w1 - w0;
        s.candidate_cpu_ns = c1 - c0;
      };
      if (s.candidate_first) {
        time_candidate();
        time_reference();
      } else {
        time_reference();
        time_candidate();
      }
      Mask(reference_out, mask_key);  // unmask: the kernel has returned
      for (std::size_t o = 0; o < job_.outputs.size() && mismatch.is_null(); ++o) {
        if (OutputWithinTolerance(job_.outputs[o], reference_out[o], Output(set, o).view())) continue;
        const OutputCheck check = CompareOutput(job_.outputs[o], reference_out[o], Output(set, o).view());
        if (!check.passed())
          mismatch = {{"round", round}, {"output", job_.outputs[o].name}, {"mismatches", check.mismatches},
                      {"first_mismatch", check.first_mismatch_index}, {"expected", check.expected},
                      {"actual", check.actual}};
      }
      for (auto& buffer : reference_out) explicit_bzero(buffer.data(), buffer.size());
      if (!mismatch.is_null()) break;
      if (round < opt.warmup_rounds) continue;
      // The calling thread's CPU time bounds the wall time only when it does all the work: with
      // one thread (OMP_THREAD_LIMIT=1) it does. (The process CPU clock ticks at 4 ms here.)
      s.discarded = job_.threads == 1 && (IsPreempted(s.reference_ns, s.reference_cpu_ns) ||
                                          IsPreempted(s.candidate_ns, s.candidate_cpu_ns));
      samples.push_back(s);
      const int n = static_cast<int>(samples.size());
      if (n >= opt.min_rounds && n % 5 == 0) {
        const RatioEstimate est = EstimateSpeedup(samples);
        if (est.median > 0 && est.relative_half_width <= opt.target_relative_ci) {
          converged = true;
          break;
        }
      }
      // The budget ends the loop only once there are enough rounds for an interval (slow kernels
      // take a few calls past the budget; the runner's deadline allows for them).
      if ((n >= kMinRoundsForInterval && NowNs(CLOCK_MONOTONIC) - start > opt.budget_seconds * 1e9) || n >= opt.max_rounds)
        break;
    }
    json rows = json::array();
    for (const TimingSample& s : samples)
      rows.push_back({s.reference_ns, s.candidate_ns, s.reference_cpu_ns, s.candidate_cpu_ns, s.input_set,
                      s.candidate_first, s.discarded});
    report::Send({FrameKind::kTiming,
                  {{"samples", rows}, {"converged", converged}, {"mismatch", mismatch},
                   {"seconds", (NowNs(CLOCK_MONOTONIC) - start) / 1e9}},
                  {}});
    json counters = json::object();
    for (const auto& [name, total] : counters_->Read()) counters[name] = candidate_calls ? total / candidate_calls : 0;
    report::Send({FrameKind::kCounters, {{"counters", counters}, {"unavailable", counters_->unavailable()}}, {}});
  }

  // XOR with a keystream derived from `key`: applying it twice restores the data.
  static void Mask(std::vector<std::vector<std::byte>>& buffers, uint64_t key) {
    for (auto& buffer : buffers) {
      Rng stream(key);
      const std::size_t words = buffer.size() / 8;
      auto* data = reinterpret_cast<uint64_t*>(buffer.data());
      for (std::size_t i = 0; i < words; ++i) data[i] ^= stream.Next();
      for (std::size_t i = words * 8; i < buffer.size(); ++i) buffer[i] ^= static_cast<std::byte>(stream.Next());
    }
  }

  [[noreturn]] void Done() {
    report::Send({FrameKind::kDone, json::object(), {}});
    _exit(0);
  }

  HarnessJob job_;
  Arena arena_;
  std::unique_ptr<Counters> counters_;
  std::unique_ptr<Reference> reference_;
  void* kernel_ = nullptr;
};

}  // namespace
}  // namespace kernelgym

int main(int argc, char** argv) {
  int control_fd = -1, report_fd = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--control-fd") == 0) control_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--report-fd") == 0) report_fd = std::atoi(argv[i + 1]);
  }
  if (control_fd < 0 || report_fd < 0) {
    std::fprintf(stderr, "usage: kernelgym-harness --control-fd N --report-fd M (started by the runner)\n");
    return 2;
  }
  kernelgym::report::Init(report_fd, 0);
  const kernelgym::Frame job_frame = kernelgym::ReadFrame(control_fd);
  kernelgym::HarnessJob job;
  try {
    if (job_frame.kind != kernelgym::FrameKind::kJob) throw std::runtime_error("first frame is not a job");
    job = kernelgym::JobFromJson(job_frame.meta);
  } catch (const std::exception& e) {
    kernelgym::Fatal(std::string("bad job: ") + e.what());
  }
  kernelgym::report::Init(report_fd, job.cookie);
  kernelgym::ApplyPlacementAndLimits(job);
  kernelgym::Harness harness(std::move(job));
  harness.control_fd = control_fd;
  harness.Run();
}
