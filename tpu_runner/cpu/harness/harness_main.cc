// kernelgym-harness: the judge of one evaluation, inside the sandbox. Trusted, small, no
// libtorch and no candidate code. It owns the seeds, the inputs, the clock, the count of trials
// and the reading of outputs; the reference and the candidate each run in a process of their
// own, which it starts and calls through a doorbell (doorbell.h, side.h):
//
//   kernelgym-harness (judge) ─┬─ kernelgym-reference  libtorch; its own copy of every input
//                              └─ kernelgym-executor   the candidate .so, unprivileged uid,
//                                                      allow-list seccomp, read-only inputs
//
// Phases (the runner's watchdog keys its deadlines on the kEvent frames):
//   trusted    the reference (pre-started with the harness, or forked warm by the zygote
//              that started this judge: zygote.h) gets its job; every correctness
//              trial's expected output is computed and sent to the runner; the reference is
//              timed alone; the executor is started and loads the candidate.
//   trials     the candidate on each trial's inputs, on every shape set (poisoned outputs); the
//              harness takes the outputs from the candidate's shared memory at the moment it sees
//              `done` (the executor stopped meanwhile) and sends them; the runner compares them
//              with the expected ones and counts the trials.
//   timing     after the runner says kProceed: reference and candidate alternate on the same
//              CPU, each timed call preceded by an untimed call of the same side, so that every
//              timed call starts from the state its own side left (never the other side's), and
//              every input drawn afresh just before it; every timed output, as taken when the
//              clock stopped, is compared with the reference's for the same inputs. Every round
//              counts.
// Every input is AES-256-CTR keystream under a key drawn here for this evaluation (inputs.h): the
// candidate sees drawn values only and cannot compute the next ones.
#include <fcntl.h>
#include <grp.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "tpu_runner/correctness.h"
#include "tpu_runner/cpu/harness/counters.h"
#include "tpu_runner/cpu/harness/doorbell.h"
#include "tpu_runner/cpu/harness/file_view.h"
#include "tpu_runner/cpu/harness/kernel_call.h"
#include "tpu_runner/cpu/harness/layout.h"
#include "tpu_runner/cpu/harness/report.h"
#include "tpu_runner/cpu/harness/side.h"
#include "tpu_runner/cpu/harness_protocol.h"
#include "tpu_runner/cpu/inputs.h"
#include "tpu_runner/timing_stats.h"

extern char** environ;

namespace kernelgym {
namespace {

using nlohmann::json;

// EstimateMedianRatio needs 6 ratios for a 95% interval.
constexpr int kMinRoundsForInterval = 6;
// A process that is not being called uses next to no CPU: the executor's own bookkeeping after
// a call (a futex wake, the next wait) takes a few microseconds, and the system now and then
// charges it a hundred or so (107 µs once, in one of 6 evaluations of an honest GEMM kernel). CPU time beyond the
// budget below, summed over every interval between calls, is a thread of the candidate's at work
// — stealing the CPU from the reference, which runs on the same CPU meanwhile, or computing the
// next answer early. 2% of the wall time is the most it can take from the reference unnoticed.
constexpr double kIdleCpuSlackNs = 1'000'000;
constexpr double kIdleCpuFraction = 0.02;
// The pause after the trials is one interval of 20 ms: a thread left running uses all of it.
constexpr double kAfterReturnCpuSlackNs = 500'000;
// The timing window's scheduling. Every round's two calls are paid as wall time, and a process of
// another tenant that the scheduler runs on the timing CPU inside a call adds its slice to that
// call: the same delay is a larger part of a short call than of a long one, so a fast reference
// against a slow kernel comes out slower than it is and the speedup moves by however much the
// neighbours ran (softmax_rows' starter: 0.08-0.33 between evaluations of one source at load 7;
// docs/benchmarks.md). A real-time policy keeps them off the timing CPU: SCHED_RR, one priority
// for the judge, the reference and the candidate alike (round-robin among equals, so the judge
// still gets the CPU every time slice from a call that never returns, and its own yields still
// reach the side it waits for). A nice value is not enough: the fair scheduler lets a running
// neighbour finish its slice before a woken task of any nice value runs (nice -20 for the three,
// set by the judge: 0.075-0.333 at load 7). Only for a single-threaded task timed on a CPU that
// leaves another to the rest of the machine; the candidate cannot change it (no scheduler call is
// on its allow-list) and threads it starts later do not inherit it (SCHED_RESET_ON_FORK).
constexpr int kTimingRealtimePriority = 1;
// Where the executor's file view is mounted before it chroots into it (in the sandbox's own /tmp).
constexpr char kViewMountPoint[] = "/tmp/kernelgym-view";

[[noreturn]] void Fatal(const std::string& message) {
  report::Send({FrameKind::kFatal, {{"message", message}}, {}});
  _exit(2);
}

void Event(const std::string& phase, int trial = -1, int shape_set = -1) {
  Frame f{FrameKind::kEvent, {{"phase", phase}}, {}};
  if (trial >= 0) f.meta["trial"] = trial;
  if (shape_set >= 0) f.meta["shape_set"] = shape_set;
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

void PinTo(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Fatal(std::string("sched_setaffinity: ") + strerror(errno));
}

int MakeMemfd(const char* name, uint64_t bytes, unsigned flags) {
  const int fd = memfd_create(name, flags);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(std::max<uint64_t>(bytes, PageSize()))) != 0)
    Fatal(std::string("memfd ") + name + ": " + strerror(errno));
  return fd;
}

std::byte* MapShared(int fd, uint64_t bytes) {
  void* m = mmap(nullptr, std::max<uint64_t>(bytes, PageSize()), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) Fatal(std::string("mmap: ") + strerror(errno));
  return static_cast<std::byte*>(m);
}

// Text the candidate may have written (the executor's violation record): printable ASCII only.
std::string Printable(const char* text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < max && text[i]; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out;
}

// The reference process, started before the job arrives so that loading libtorch overlaps the
// runner's compile. Its memfd is sized once the job says how big the tensors are.
struct PendingReference {
  pid_t pid = -1;
  int memfd = -1;
  int job_fd = -1;     // write end: the job, then closed
  int status_fd = -1;  // read end: "ok" or "error: ..."
};

PendingReference StartReference(const std::string& program) {
  PendingReference r;
  r.memfd = memfd_create("kernelgym-reference", MFD_CLOEXEC);
  int job[2], status[2];
  if (r.memfd < 0 || pipe2(job, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0)
    Fatal(std::string("reference channels: ") + strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto 3/4/5 clears close-on-exec; go through high numbers so that no source is
  // overwritten before it is copied.
  const int srcs[3] = {r.memfd, job[0], status[1]};
  for (int i = 0; i < 3; ++i) posix_spawn_file_actions_adddup2(&actions, srcs[i], 100 + i);
  for (int i = 0; i < 3; ++i) posix_spawn_file_actions_adddup2(&actions, 100 + i, 3 + i);
  for (int i = 0; i < 3; ++i) posix_spawn_file_actions_addclose(&actions, 100 + i);
  char* argv[] = {const_cast<char*>(program.c_str()), nullptr};
  const int rc = posix_spawn(&r.pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) Fatal("cannot start " + program + ": " + strerror(rc));
  close(job[0]);
  close(status[1]);
  r.job_fd = job[1];
  r.status_fd = status[0];
  return r;
}

// The reference a zygote forked as this process's child before exec'ing it (zygote.cc): its
// memfd, job and status pipe are on 5, 6 and 7.
PendingReference AdoptReference(pid_t pid) {
  PendingReference r;
  r.pid = pid;
  r.memfd = 5;
  r.job_fd = 6;
  r.status_fd = 7;
  for (int fd : {r.memfd, r.job_fd, r.status_fd})
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) Fatal(std::string("the forked reference's channels: ") + strerror(errno));
  return r;
}

// Per shape set: where its tensors live in each process's files. [k] is the input set.
struct Places {
  std::vector<int> cand_in[2], cand_out[2], ref_in[2], ref_out;
};

class Judge {
 public:
  Judge(HarnessJob job, PendingReference reference, std::string executor_program)
      : job_(std::move(job)), pending_(reference), executor_program_(std::move(executor_program)) {}

  [[noreturn]] void Run() {
    Event("trusted");
    if (job_.shape_sets.empty()) Fatal("the job has no shape set");
    // The inputs' keys: drawn here, for this evaluation, and never written anywhere. The reference
    // gets drawn values only; the executor is forked from this process, but exec replaces its
    // memory before any code of the candidate's runs. One key for the trials, one for timing:
    // whatever seeds the policy made the server choose, no trial's stream is a timed round's.
    if (!InputKey::Draw(trial_key_) || !InputKey::Draw(timing_key_))
      Fatal(std::string("no random source for the inputs' keys: ") + strerror(errno));
    LayOut();
    SetUpReference();
    SendExpectedOutputs();
    const double reference_alone_ns = job_.run_timing ? TimeReferenceAlone() : 0;
    Event("confine");
    StartExecutor();
    protections_["seccomp"] = true;
    protections_["seccomp_allow_list"] = true;
    protections_["readonly_inputs"] = true;
    protections_["output_guard_pages"] = true;
    protections_["separate_reference_process"] = true;
    protections_["clock_outside_candidate"] = true;
    protections_["keyed_inputs"] = true;           // AES-256-CTR under the judge's own key
    protections_["outputs_taken_at_done"] = true;  // with the executor stopped (Side::Ring)
    report::Send({FrameKind::kTrustedDone,
                  {{"reference_alone_ns", reference_alone_ns},
                   {"protections", protections_},
                   {"call_limit_seconds", CallLimitNs(0) / 1e9}},
                  {}});
    RunTrials();
    if (!job_.run_timing) Done();
    const Frame go = ReadFrame(control_fd);
    if (go.kind != FrameKind::kProceed) Shutdown(0);
    RunTiming();
    Done();
  }

  int control_fd = -1;

 private:
  const ShapeSetJob& Set(int s) const { return job_.shape_sets[static_cast<std::size_t>(s)]; }
  int NumSets() const { return static_cast<int>(job_.shape_sets.size()); }

  std::span<std::byte> CandIn(int s, int k, std::size_t i) const { return View(cand_in_, cand_in_layout_, places_[s].cand_in[k][i]); }
  std::span<std::byte> CandOut(int s, int k, std::size_t o) const { return View(cand_out_, cand_out_layout_, places_[s].cand_out[k][o]); }
  std::span<std::byte> RefIn(int s, int k, std::size_t i) const { return View(ref_mem_, ref_layout_, places_[s].ref_in[k][i]); }
  std::span<std::byte> RefOut(int s, std::size_t o) const { return View(ref_mem_, ref_layout_, places_[s].ref_out[o]); }
  static std::span<std::byte> View(std::byte* base, const FileLayout& layout, int index) {
    const BufferPlace& b = layout.buffers()[static_cast<std::size_t>(index)];
    return {base + b.data_offset(), b.bytes};
  }

  void LayOut() {
    ref_layout_.Add("doorbell", sizeof(Doorbell), false);  // page 0
    places_.resize(job_.shape_sets.size());
    for (int s = 0; s < NumSets(); ++s) {
      for (int k = 0; k < 2; ++k) {
        for (const TensorSpec& t : Set(s).inputs) {
          places_[s].cand_in[k].push_back(cand_in_layout_.Add(t.name, t.NumBytes(), true));
          places_[s].ref_in[k].push_back(ref_layout_.Add(t.name, t.NumBytes(), true));
        }
        for (const TensorSpec& t : Set(s).outputs) places_[s].cand_out[k].push_back(cand_out_layout_.Add(t.name, t.NumBytes(), false));
      }
      for (const TensorSpec& t : Set(s).outputs) places_[s].ref_out.push_back(ref_layout_.Add(t.name, t.NumBytes(), false));
    }
    // The candidate's inputs: written here through this mapping, then sealed, so that no process
    // can ever map them writable again — the executor gets a read-only view and no alias.
    cand_in_fd_ = MakeMemfd("kernelgym-inputs", cand_in_layout_.size(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cand_in_ = MapShared(cand_in_fd_, cand_in_layout_.size());
    if (fcntl(cand_in_fd_, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
      Fatal(std::string("sealing the inputs: ") + strerror(errno));
    cand_out_fd_ = MakeMemfd("kernelgym-outputs", cand_out_layout_.size(), MFD_CLOEXEC);
    cand_out_ = MapShared(cand_out_fd_, cand_out_layout_.size());
    cand_bell_fd_ = MakeMemfd("kernelgym-doorbell", PageSize(), MFD_CLOEXEC);
    cand_bell_ = new (MapShared(cand_bell_fd_, PageSize())) Doorbell();
  }

  void SetUpReference() {
    if (ftruncate(pending_.memfd, static_cast<off_t>(ref_layout_.size())) != 0)
      Fatal(std::string("reference memfd: ") + strerror(errno));
    ref_mem_ = MapShared(pending_.memfd, ref_layout_.size());
    Doorbell* bell = new (ref_mem_) Doorbell();
    json sets = json::array();
    for (int s = 0; s < NumSets(); ++s) {
      json inputs = json::array(), outputs = json::array(), in_places = json::array(), out_places = json::array();
      for (const TensorSpec& t : Set(s).inputs) inputs.push_back(TensorToJson(t));
      for (const TensorSpec& t : Set(s).outputs) outputs.push_back(TensorToJson(t));
      for (int k = 0; k < 2; ++k) {
        json set_places = json::array();
        for (int index : places_[s].ref_in[k]) set_places.push_back(ToJson(ref_layout_.buffers()[index]));
        in_places.push_back(set_places);
      }
      for (int index : places_[s].ref_out) out_places.push_back(ToJson(ref_layout_.buffers()[index]));
      sets.push_back({{"inputs", inputs}, {"outputs", outputs}, {"input_buffers", in_places}, {"output_buffers", out_places}});
    }
    const json message = {{"source", job_.reference_source}, {"threads", job_.threads}, {"cpus", job_.cpus},
                          {"file_bytes", ref_layout_.size()}, {"sets", sets}};
    const std::string text = message.dump();
    if (!WriteAll(pending_.job_fd, text)) Fatal("the reference process is gone before its job");
    close(pending_.job_fd);
    std::string status;
    char c;
    while (read(pending_.status_fd, &c, 1) == 1 && c != '\n') status += c;
    if (status != "ok") {
      reference_ = Side(pending_.pid, bell);
      reference_.Exited();
      Fatal(status.empty() ? "the reference process died while setting up (wait status " +
                                 std::to_string(reference_.wait_status()) + ")"
                           : status.substr(0, 7) == "error: " ? status.substr(7) : status);
    }
    reference_ = Side(pending_.pid, bell);
    if (!reference_.AwaitReady(10e9)) Fatal("the reference process did not get ready");
  }

  // The reference is trusted: a limit it hits is the task's bug or the machine's, not a verdict.
  Side::Call CallReference(CallOp op, int s, int k) {
    const Side::Call call = reference_.Ring(op, static_cast<uint32_t>(s), static_cast<uint32_t>(k),
                                            job_.max_call_seconds * 1e9, 10 * job_.max_call_seconds * 1e9);
    if (!call.ok()) {
      reference_.Exited();
      std::string why;
      char c;
      fcntl(pending_.status_fd, F_SETFL, O_NONBLOCK);
      while (read(pending_.status_fd, &c, 1) == 1 && c != '\n') why += c;
      if (why.substr(0, 7) == "error: ") why = why.substr(7);
      Fatal(why.empty() ? "the reference process did not finish a call (wait status " +
                              std::to_string(reference_.wait_status()) + ")"
                        : why);
    }
    return call;
  }

  void FillInputs(int s, int k, const InputKey& key, uint64_t seed) {
    for (std::size_t i = 0; i < Set(s).inputs.size(); ++i) {
      FillInput(Set(s).inputs[i], RefIn(s, k, i), key, MixSeed(seed, i));
      std::memcpy(CandIn(s, k, i).data(), RefIn(s, k, i).data(), RefIn(s, k, i).size());
    }
  }

  // The limit for one candidate call on shape set `s`, in CPU nanoseconds.
  double CallLimitNs(int s) const {
    const double reference = reference_call_ns_.size() > static_cast<std::size_t>(s) ? reference_call_ns_[s] : 0;
    return std::clamp(job_.call_limit_factor * reference, job_.min_call_seconds * 1e9, job_.max_call_seconds * 1e9);
  }

  void SendExpectedOutputs() {
    reference_call_ns_.assign(job_.shape_sets.size(), 0);
    int trial = 0;
    for (int s = 0; s < NumSets(); ++s) {
      double fastest = 0;
      for (uint64_t seed : Set(s).seeds) {
        FillInputs(s, 0, trial_key_, seed);
        const Side::Call call = CallReference(CallOp::kRun, s, 0);
        fastest = fastest == 0 ? call.wall_ns : std::min(fastest, call.wall_ns);
        CallReference(CallOp::kPublish, s, 0);
        for (std::size_t o = 0; o < Set(s).outputs.size(); ++o) {
          const std::span<std::byte> out = RefOut(s, o);
          report::Send({FrameKind::kExpected, {{"trial", trial}, {"output", o}},
                        std::string(reinterpret_cast<const char*>(out.data()), out.size())});
        }
        ++trial;
      }
      reference_call_ns_[s] = fastest;
    }
  }

  // The reference's time with nothing else between its calls, measured the way the timing loop
  // measures it (an untimed call on the other inputs, then the timed one): the baseline that
  // shows whether a kernel slowed the reference down.
  double TimeReferenceAlone() {
    for (int k = 0; k < 2; ++k) FillInputs(0, k, timing_key_, MixSeed(job_.timing_seed, 1000 + k));
    std::vector<double> times;
    const double start = MonotonicNs();
    for (int i = 0; i < 100; ++i) {
      CallReference(CallOp::kRun, 0, (i + 1) % 2);
      times.push_back(CallReference(CallOp::kRun, 0, i % 2).wall_ns);
      if (i >= 6 && MonotonicNs() - start > 0.05e9) break;  // informational: keep it short
    }
    return Percentile(times, 0.5);
  }

  void StartExecutor() {
    json buffers = json::array(), calls = json::array();
    std::vector<int> in_index(cand_in_layout_.buffers().size()), out_index(cand_out_layout_.buffers().size());
    for (std::size_t i = 0; i < cand_in_layout_.buffers().size(); ++i) {
      in_index[i] = static_cast<int>(buffers.size());
      buffers.push_back(ToJson(cand_in_layout_.buffers()[i]));
    }
    for (std::size_t o = 0; o < cand_out_layout_.buffers().size(); ++o) {
      out_index[o] = static_cast<int>(buffers.size());
      buffers.push_back(ToJson(cand_out_layout_.buffers()[o]));
    }
    for (int s = 0; s < NumSets(); ++s)
      for (int k = 0; k < 2; ++k) {
        json args = json::array();
        for (int i : places_[s].cand_in[k]) args.push_back({{"b", in_index[i]}});
        for (int o : places_[s].cand_out[k]) args.push_back({{"b", out_index[o]}});
        for (const SizeParam& z : Set(s).sizes) args.push_back({{"v", static_cast<uint64_t>(z.value)}});
        if (args.size() > kMaxKernelArgs)
          Fatal("the signature has more than " + std::to_string(kMaxKernelArgs) + " arguments");
        calls.push_back(args);
      }
    view_ = CandidateView(executor_program_, job_.kernel_path, job_.libraries);
    // The executor takes the first of these that exists: the kernel in its own file view, or
    // where the judge sees it when the machine does not allow a view.
    const std::string plan =
        json{{"kernels", {view_.kernel, job_.kernel_path}}, {"buffers", buffers}, {"calls", calls}}.dump();
    mkdir(kViewMountPoint, 0755);

    int plan_pipe[2], go_pipe[2];
    if (pipe2(plan_pipe, O_CLOEXEC) != 0 || pipe2(go_pipe, O_CLOEXEC) != 0) Fatal(std::string("pipe: ") + strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) Fatal(std::string("fork: ") + strerror(errno));
    if (pid == 0) ExecExecutor(plan_pipe[0], go_pipe[0]);  // never returns
    close(plan_pipe[0]);
    close(go_pipe[0]);
    executor_ = Side(pid, cand_bell_);
    // Counters are opened while the child still has this process's uid (a process may watch
    // its own uid's processes); the child drops its uid only after the go byte.
    counters_ = std::make_unique<Counters>(pid);
    const char byte = 1;
    if (write(go_pipe[1], &byte, 1) != 1) Fatal("the executor did not start");
    close(go_pipe[1]);
    const bool sent = WriteAll(plan_pipe[1], plan);
    close(plan_pipe[1]);
    protections_["unprivileged_uid"] = job_.sandbox_uid != 0 || geteuid() != 0;
    // Until the executor says it is about to load the candidate, only our code has run in it: a
    // failure there is the harness's (an internal error), never the candidate's — and nothing
    // the candidate does later can make its own failure look like one.
    const double start = MonotonicNs();
    while (sent && cand_bell_->loading.load(std::memory_order_acquire) == 0) {
      if (executor_.Exited() || MonotonicNs() - start > 30e9) {
        executor_.Kill();
        const std::string why = cand_bell_->violation_written.load()
                                    ? Printable(cand_bell_->violation_message, sizeof(cand_bell_->violation_message))
                                    : "wait status " + std::to_string(executor_.wait_status());
        Fatal("the candidate's process could not be set up: " + why);
      }
      FutexWait(&cand_bell_->loading, 0, 10'000'000);
    }
    if (!sent) {
      executor_.Kill();
      Fatal("the candidate's process did not take its plan (wait status " + std::to_string(executor_.wait_status()) + ")");
    }
    protections_["minimal_file_view"] = cand_bell_->private_view != 0;
    cand_bell_->loading_ack.store(1, std::memory_order_release);
    FutexWakeAll(&cand_bell_->loading_ack);
    // The candidate's constructors run now: they get the time a call gets.
    const double load_limit_ns = job_.max_call_seconds * 1e9;
    if (!executor_.AwaitReady(load_limit_ns)) {
      if (!executor_.Exited())
        CandidateFailed("loading the kernel", "call_time_limit",
                        std::to_string(static_cast<int>(job_.max_call_seconds)) + " s (its constructors did not finish)");
      CandidateFailed("loading the kernel");
    }
  }


  // In the forked child: placement, limits, uid, descriptors, then exec. Only async-signal-safe
  // calls (the parent may have threads of libc's).
  [[noreturn]] void ExecExecutor(int plan_fd, int go_fd) {
    char byte;
    if (read(go_fd, &byte, 1) != 1) _exit(120);
    // Descriptors first: 3..6 as executor_main.cc expects them (through high numbers, so that no
    // source is overwritten before it is copied), nothing else past stderr.
    const int srcs[4] = {plan_fd, cand_in_fd_, cand_out_fd_, cand_bell_fd_};
    for (int i = 0; i < 4; ++i)
      if (dup2(srcs[i], 100 + i) < 0) _exit(122);
    for (int i = 0; i < 4; ++i)
      if (dup2(100 + i, 3 + i) < 0) _exit(122);
    syscall(SYS_close_range, 7, ~0U, 0);
    if (!job_.cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : job_.cpus) CPU_SET(c, &set);
      if (sched_setaffinity(0, sizeof(set), &set) != 0) _exit(123);
    }
    auto limit = [](int resource, rlim_t value) {
      struct rlimit l{value, value};
      setrlimit(resource, &l);
    };
    limit(RLIMIT_CORE, 0);
    limit(RLIMIT_FSIZE, 0);
    limit(RLIMIT_NOFILE, 64);
    limit(RLIMIT_RTPRIO, 0);  // its scheduling is the judge's to set (RaiseTimingPriority), never its own
    if (job_.cpu_seconds > 0) limit(RLIMIT_CPU, static_cast<rlim_t>(job_.cpu_seconds));
    if (job_.address_space > 0) limit(RLIMIT_AS, job_.address_space);
    // Threads count against RLIMIT_NPROC per uid: room for an OpenMP pool, no thread bombs.
    limit(RLIMIT_NPROC, static_cast<rlim_t>(job_.threads) * 2 + 16);
    // The file view needs the capabilities the uid change gives up: first.
    std::string program = executor_program_;
    std::string view_error;
    if (EnterView(view_, kViewMountPoint, view_error)) {
      cand_bell_->private_view = 1;
      program = view_.executor;
    }
    if (job_.sandbox_uid != 0 && geteuid() == 0) {
      const uid_t uid = job_.sandbox_uid;
      if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(121);
    }
    // After the uid change, which clears it: the executor dies with the judge. (It cannot undo
    // this: prctl is not on its allow-list.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(124);
    char* argv[] = {const_cast<char*>(program.c_str()), nullptr};
    execve(program.c_str(), argv, environ);
    _exit(127);
  }

  // The candidate's process failed (died, or broke a rule while alive): say how, and stop.
  [[noreturn]] void CandidateFailed(const std::string& during, const std::string& kind = "", const std::string& message = "",
                                    long long value = 0) {
    std::string k = kind, m = message;
    long long v = value;
    if (k.empty()) {
      executor_.Kill();
      Doorbell* bell = cand_bell_;
      if (bell->violation_written.load(std::memory_order_acquire)) {
        // Written in the candidate's process, so possibly by the candidate: only the kinds our
        // crash handlers write are taken as they are; anything else is a crash.
        k = Printable(bell->violation_kind, sizeof(bell->violation_kind));
        static const char* const kKnown[] = {"seccomp", "out_of_bounds", "input_write", "signal", "terminate", "exit", "load"};
        if (std::find(std::begin(kKnown), std::end(kKnown), k) == std::end(kKnown)) k = "signal";
        m = Printable(bell->violation_message, sizeof(bell->violation_message));
        v = bell->violation_value;
      } else {
        const int status = executor_.wait_status();
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) {
          k = "cpu_limit";
          m = "the candidate process's CPU-time limit (" + std::to_string(static_cast<long long>(job_.cpu_seconds)) + " s)";
        } else if (WIFSIGNALED(status)) {
          k = "signal";
          m = strsignal(WTERMSIG(status));
          v = WTERMSIG(status);
        } else {
          k = "exited";
          m = "the kernel's process exited with status " + std::to_string(WEXITSTATUS(status));
          v = WEXITSTATUS(status);
        }
      }
    } else {
      executor_.Kill();
    }
    report::Send({FrameKind::kViolation, {{"kind", k}, {"message", m}, {"value", v}, {"during", during}}, {}});
    Shutdown(0);
  }

  // `take_outputs`: the call's outputs are copied into taken_ at the moment the judge sees
  // `done`, with the executor stopped (Side::Ring): what is compared is what was there when the
  // clock stopped, never what a thread of the candidate's writes afterwards.
  Side::Call CallCandidate(int s, int k, const std::string& during, bool take_outputs = false) {
    const double limit = CallLimitNs(s);
    std::function<void()> take;
    if (take_outputs)
      take = [this, s, k] {
        taken_.resize(Set(s).outputs.size());
        for (std::size_t o = 0; o < Set(s).outputs.size(); ++o) {
          const std::span<std::byte> b = CandOut(s, k, o);
          taken_[o].assign(b.begin(), b.end());
        }
      };
    const Side::Call call = executor_.Ring(CallOp::kRun, static_cast<uint32_t>(s), static_cast<uint32_t>(k), limit,
                                           10 * limit + 1e9, take);
    switch (call.outcome) {
      case Side::Call::Outcome::kDone: break;
      case Side::Call::Outcome::kDied: CandidateFailed(during);
      case Side::Call::Outcome::kCpuLimit:
      case Side::Call::Outcome::kBlocked:
      case Side::Call::Outcome::kWallLimit: {
        char text[320];
        std::snprintf(text, sizeof(text), "%.3g s of CPU time (%.0fx the reference's %.3g ms on these shapes)%s",
                      limit / 1e9, job_.call_limit_factor, reference_call_ns_[s] / 1e6,
                      call.outcome == Side::Call::Outcome::kBlocked
                          ? "; it was asleep, using no CPU, past that time"
                          : call.outcome == Side::Call::Outcome::kWallLimit ? "; it ran out of wall-clock time" : "");
        CandidateFailed(during, "call_time_limit", text, static_cast<long long>(call.cpu_ns));
      }
    }
    idle_cpu_ns_ += call.idle_cpu_ns;
    idle_wall_ns_ += call.idle_wall_ns;
    if (idle_cpu_ns_ > kIdleCpuSlackNs + kIdleCpuFraction * idle_wall_ns_) {
      char text[256];
      std::snprintf(text, sizeof(text), "%.0f us of CPU time in %.0f us between its calls (the last interval: %.0f us in %.0f us)",
                    idle_cpu_ns_ / 1e3, idle_wall_ns_ / 1e3, call.idle_cpu_ns / 1e3, call.idle_wall_ns / 1e3);
      CandidateFailed(during, "ran_between_calls", text, static_cast<long long>(idle_cpu_ns_));
    }
    return call;
  }

  void PoisonOutputs(int s, int k, int variant) {
    for (std::size_t o = 0; o < Set(s).outputs.size(); ++o) FillPoison(Set(s).outputs[o].dtype, CandOut(s, k, o), variant);
  }

  // The outputs taken when the last call's `done` was seen.
  void SendOutputs(int s, int trial, int call) {
    for (std::size_t o = 0; o < Set(s).outputs.size(); ++o)
      report::Send({FrameKind::kTrialOutput, {{"trial", trial}, {"output", o}, {"call", call}},
                    std::string(reinterpret_cast<const char*>(taken_[o].data()), taken_[o].size())});
  }

  void RunTrials() {
    int trial = 0;
    for (int s = 0; s < NumSets(); ++s) {
      for (std::size_t t = 0; t < Set(s).seeds.size(); ++t, ++trial) {
        for (std::size_t i = 0; i < Set(s).inputs.size(); ++i)
          FillInput(Set(s).inputs[i], CandIn(s, 0, i), trial_key_, MixSeed(Set(s).seeds[t], i));
        PoisonOutputs(s, 0, 0);
        Event("trial", trial, s);
        CallCandidate(s, 0, "correctness trial " + std::to_string(trial), true);
        SendOutputs(s, trial, 0);
        if (t == 0) {  // same inputs, different poison: must give the same bits
          PoisonOutputs(s, 0, 1);
          Event("repeat", trial, s);
          CallCandidate(s, 0, "the repeat call of trial " + std::to_string(trial), true);
          SendOutputs(s, trial, 1);
        }
      }
    }
    // Work left running after `done` (a thread, an async task) shows up as outputs that differ
    // from what was taken at `done`, or as CPU time used, after kernel() came back.
    const int s = NumSets() - 1;
    const double cpu0 = executor_.CpuNs(), wall0 = MonotonicNs();
    timespec pause{0, 20'000'000};
    nanosleep(&pause, nullptr);
    const double idle_cpu = executor_.CpuNs() - cpu0, idle_wall = MonotonicNs() - wall0;
    bool changed = false;
    for (std::size_t o = 0; o < Set(s).outputs.size(); ++o)
      changed = changed || std::memcmp(taken_[o].data(), CandOut(s, 0, o).data(), taken_[o].size()) != 0;
    const bool ran = idle_cpu > kAfterReturnCpuSlackNs + kIdleCpuFraction * idle_wall;
    report::Send({FrameKind::kAfterReturn, {{"changed", changed}, {"ran", ran}, {"idle_cpu_ns", idle_cpu}, {"idle_wall_ns", idle_wall}}, {}});
  }

  // Gives the judge, the reference and the executor the timing window's scheduling (above), all
  // three or none: a priority for one side only would be a handicap for the other. Needs
  // CAP_SYS_NICE (a runner as root) or an RLIMIT_RTPRIO that allows it; without, the window runs
  // as the runner does and the report says why. Returns {"scheduling": "rr:1" or "normal"} and,
  // when it was refused, "error".
  json RaiseTimingPriority() {
    if (job_.threads != 1 || job_.cpus.empty() || static_cast<long>(job_.cpus.size()) >= sysconf(_SC_NPROCESSORS_ONLN))
      return {{"scheduling", "normal"}};
    struct Was {
      pid_t pid;
      int policy;
      sched_param param;
    };
    std::vector<Was> changed;
    const pid_t pids[3] = {executor_.pid(), reference_.pid(), getpid()};  // the one most likely refused first
    for (pid_t pid : pids) {
      Was was{pid, sched_getscheduler(pid), {}};
      sched_param rt{};
      rt.sched_priority = kTimingRealtimePriority;
      if (was.policy < 0 || sched_getparam(pid, &was.param) != 0 ||
          sched_setscheduler(pid, SCHED_RR | SCHED_RESET_ON_FORK, &rt) != 0) {
        const std::string why = std::string("sched_setscheduler(SCHED_RR): ") + strerror(errno);
        for (const Was& w : changed) sched_setscheduler(w.pid, w.policy, &w.param);
        return {{"scheduling", "normal"}, {"error", why}};
      }
      changed.push_back(was);
    }
    return {{"scheduling", "rr:" + std::to_string(kTimingRealtimePriority)}};
  }

  void RunTiming() {
    Event("timing");
    const json priority = RaiseTimingPriority();
    const TimingOptions& opt = job_.timing;
    const ShapeSetJob& set = Set(0);
    for (int k = 0; k < 2; ++k) FillInputs(0, k, timing_key_, MixSeed(job_.timing_seed, 1000 + k));
    // The inputs of the next timed call, drawn here and copied into each side's memory just
    // before that side's timed call.
    std::vector<std::vector<std::byte>> staged(set.inputs.size());
    for (std::size_t i = 0; i < set.inputs.size(); ++i) staged[i].resize(set.inputs[i].NumBytes());
    std::vector<TimingSample> samples;
    json mismatch;
    bool converged = false;
    int candidate_calls = 0;
    const double start = MonotonicNs();
    for (int round = 0;; ++round) {
      const int y = round % 2, x = 1 - y;
      for (std::size_t i = 0; i < set.inputs.size(); ++i) {
        if (opt.refresh_inputs || round < 2) {
          // Every element drawn afresh: a kernel that keeps the last inputs and outputs and
          // recomputes only what changed has nothing to reuse.
          FillInput(set.inputs[i], staged[i], timing_key_, MixSeed(job_.timing_seed, 7919ULL * static_cast<uint64_t>(round) + i));
        } else {
          std::memcpy(staged[i].data(), RefIn(0, y, i).data(), staged[i].size());
        }
      }
      TimingSample s;
      s.input_set = y;
      s.candidate_first = round % 4 == 1 || round % 4 == 2;  // ABBA: order effects cancel
      auto time_reference = [&] {
        CallReference(CallOp::kRun, 0, x);  // from its own state, not the candidate's
        for (std::size_t i = 0; i < set.inputs.size(); ++i) std::memcpy(RefIn(0, y, i).data(), staged[i].data(), staged[i].size());
        const Side::Call call = CallReference(CallOp::kRun, 0, y);
        CallReference(CallOp::kPublish, 0, y);
        s.reference_ns = call.wall_ns;
        s.reference_cpu_ns = call.cpu_ns;
      };
      auto time_candidate = [&] {
        CallCandidate(0, x, "timing");  // from its own state, not the reference's
        for (std::size_t i = 0; i < set.inputs.size(); ++i) std::memcpy(CandIn(0, y, i).data(), staged[i].data(), staged[i].size());
        PoisonOutputs(0, y, 0);
        counters_->Enable();
        const Side::Call call = CallCandidate(0, y, "timing", true);
        counters_->Disable();
        ++candidate_calls;
        s.candidate_ns = call.wall_ns;
        s.candidate_cpu_ns = call.cpu_ns;
      };
      if (s.candidate_first) {
        time_candidate();
        time_reference();
      } else {
        time_reference();
        time_candidate();
      }
      // The candidate's outputs as they were when its clock stopped (taken_), in either order.
      for (std::size_t o = 0; o < set.outputs.size() && mismatch.is_null(); ++o) {
        if (OutputWithinTolerance(set.outputs[o], RefOut(0, o), taken_[o])) continue;
        const OutputCheck check = CompareOutput(set.outputs[o], RefOut(0, o), taken_[o]);
        if (!check.passed())
          mismatch = {{"round", round}, {"output", set.outputs[o].name}, {"mismatches", check.mismatches},
                      {"first_mismatch", check.first_mismatch_index}, {"expected", check.expected},
                      {"actual", check.actual}};
      }
      if (!mismatch.is_null()) break;
      if (round < opt.warmup_rounds) continue;
      // Every round counts: no rule here may be driven by what the candidate controls, and its
      // own wall and CPU time are its to shape (sleeping in a call adds wall time, not CPU time),
      // so none is discarded. The median of the ratios and its order-statistic interval carry
      // the minority of rounds another tenant of the machine disturbs.
      s.discarded = false;
      samples.push_back(s);
      const int n = static_cast<int>(samples.size());
      if (TimingConverged(samples, opt.min_rounds, opt.target_relative_ci)) {
        converged = true;
        break;
      }
      // The budget ends the loop only once there are enough rounds for an interval (slow kernels
      // take a few calls past the budget; the runner's deadline allows for them).
      if ((n >= kMinRoundsForInterval && MonotonicNs() - start > opt.budget_seconds * 1e9) || n >= opt.max_rounds) break;
    }
    json rows = json::array();
    for (const TimingSample& s : samples)
      rows.push_back({s.reference_ns, s.candidate_ns, s.reference_cpu_ns, s.candidate_cpu_ns, s.input_set,
                      s.candidate_first, s.discarded});
    report::Send({FrameKind::kTiming,
                  {{"samples", rows}, {"converged", converged}, {"mismatch", mismatch},
                   {"seconds", (MonotonicNs() - start) / 1e9}, {"priority", priority}},
                  {}});
    json counters = json::object();
    for (const auto& [name, total] : counters_->Read()) counters[name] = candidate_calls ? total / candidate_calls : 0;
    report::Send({FrameKind::kCounters, {{"counters", counters}, {"unavailable", counters_->unavailable()}}, {}});
  }

  [[noreturn]] void Shutdown(int code) {
    executor_.Kill();
    if (reference_.bell()) {
      reference_.bell()->op = static_cast<uint32_t>(CallOp::kExit);
      reference_.Kill();
    }
    _exit(code);
  }

  [[noreturn]] void Done() {
    report::Send({FrameKind::kDone, json::object(), {}});
    Shutdown(0);
  }

  HarnessJob job_;
  PendingReference pending_;
  std::string executor_program_;
  FileView view_;
  FileLayout cand_in_layout_, cand_out_layout_, ref_layout_;
  std::vector<Places> places_;
  int cand_in_fd_ = -1, cand_out_fd_ = -1, cand_bell_fd_ = -1;
  std::byte* cand_in_ = nullptr;
  std::byte* cand_out_ = nullptr;
  Doorbell* cand_bell_ = nullptr;
  std::byte* ref_mem_ = nullptr;
  Side reference_, executor_;
  std::vector<double> reference_call_ns_;  // per shape set: the reference's fastest trial call
  double idle_cpu_ns_ = 0, idle_wall_ns_ = 0;  // the executor's, summed over every interval between calls
  std::unique_ptr<Counters> counters_;
  InputKey trial_key_, timing_key_;  // the inputs' secrets: never leave this process
  std::vector<std::vector<std::byte>> taken_;  // per output: the last taken call's outputs, as at `done`
  json protections_ = json::object();
};

}  // namespace
}  // namespace kernelgym

int main(int argc, char** argv) {
  int control_fd = -1, report_fd = -1;
  pid_t forked_reference = -1;
  std::string reference_program, executor_program;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--control-fd") == 0) control_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--report-fd") == 0) report_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reference") == 0) reference_program = argv[i + 1];
    if (std::strcmp(argv[i], "--executor") == 0) executor_program = argv[i + 1];
    if (std::strcmp(argv[i], "--forked-reference") == 0) forked_reference = std::atoi(argv[i + 1]);
  }
  if (control_fd < 0 || report_fd < 0 || reference_program.empty() || executor_program.empty()) {
    std::fprintf(stderr,
                 "usage: kernelgym-harness --control-fd N --report-fd M --reference PATH --executor PATH "
                 "(started by the runner)\n");
    return 2;
  }
  kernelgym::report::Init(report_fd);
  signal(SIGPIPE, SIG_IGN);
  // The reference: forked warm by the zygote that started this judge (zygote.h; it is already
  // this process's child, on descriptors 5-7), or started now, loading libtorch while the runner
  // compiles the candidate.
  const kernelgym::PendingReference reference = forked_reference > 0 ? kernelgym::AdoptReference(forked_reference)
                                                                     : kernelgym::StartReference(reference_program);
  // The first report: the reference has loaded libtorch (or died: its status pipe ends, and
  // SetUpReference says so). The runner waits for it before it takes the host's timing lock, so
  // that the lock is never held while libtorch loads (~0.45 CPU-s; seconds on a loaded machine).
  {
    std::string line;
    char c;
    while (read(reference.status_fd, &c, 1) == 1 && c != '\n') line += c;
    kernelgym::report::Send({kernelgym::FrameKind::kEvent, {{"phase", "warm"}, {"reference", line}}, {}});
  }
  const kernelgym::Frame job_frame = kernelgym::ReadFrame(control_fd);
  kernelgym::HarnessJob job;
  try {
    if (job_frame.kind != kernelgym::FrameKind::kJob) throw std::runtime_error("first frame is not a job");
    job = kernelgym::JobFromJson(job_frame.meta);
  } catch (const std::exception& e) {
    kernelgym::Fatal(std::string("bad job: ") + e.what());
  }
  kernelgym::PinTo(job.cpus);
  kernelgym::Judge judge(std::move(job), reference, executor_program);
  judge.control_fd = control_fd;
  judge.Run();
}
