// kernelgym-reference: the task's TorchScript reference in a process of its own. Trusted: it
// runs only the task's reference.py, and the candidate can reach neither its memory nor its
// descriptors. It starts one of two ways:
//   - spawned by the judge (kernelgym-harness) ahead of the job, so that loading libtorch
//     (~0.45-0.7 CPU-s) overlaps the compile: what `kernelgym eval` does;
//   - forked from a warm zygote (`--zygote`, zygote.cc): a process that loaded libtorch once per
//     runner and forks, per evaluation, the judge and this process as the judge's child — the
//     served runners' way, which pays for libtorch once instead of once per evaluation.
// Either way the judge hands it:
//   3  a memfd: the doorbell page, then the reference's own copy of every input and its outputs
//   4  the job (JSON, read to EOF): the source, threads, CPUs and where each tensor lives
//   5  a status pipe: "loaded CPU_SECONDS\n" when it is ready for its job (libtorch loaded; the
//      CPU time this process used to get there: ~0 when forked warm), then "ok\n" once set up,
//      or "error: ...\n" (then it exits)
// Then it runs calls when the judge rings: kRun computes on (shape set, input set) and keeps the
// result; kPublish copies it into the shared output buffers (outside the timed call, as the
// candidate's outputs need no copy).
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpu_runner/cpu/harness/doorbell.h"
#include "tpu_runner/cpu/harness/layout.h"
#include "tpu_runner/cpu/harness/read_to_end.h"
#include "tpu_runner/cpu/harness/reference.h"
#include "tpu_runner/cpu/harness/zygote.h"
#include "tpu_runner/cpu/harness_protocol.h"

namespace kernelgym {
namespace {

constexpr int kMemFd = 3, kJobFd = 4, kStatusFd = 5;

void Status(const std::string& line) {
  const std::string text = line + "\n";
  if (write(kStatusFd, text.data(), text.size()) < 0) _exit(3);
}

[[noreturn]] void Fail(const std::string& message) {
  Status("error: " + message);
  _exit(1);
}

struct ShapeSetRuntime {
  std::unique_ptr<Reference> reference;
  std::vector<std::span<std::byte>> outputs;
};

}  // namespace
}  // namespace kernelgym

namespace kernelgym {

// The reference's life from "loaded" on, on descriptors 3-5 (above). Its parent is the judge.
[[noreturn]] void RunReference() {
  using nlohmann::json;
  // libtorch is loaded (the dynamic loader and its static constructors ran before main, or in
  // the zygote this process was forked from): the judge tells the runner, which takes the
  // host's timing lock only now (harness_main.cc). The CPU time so far says which start it was.
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  char loaded[64];
  std::snprintf(loaded, sizeof(loaded), "loaded %.6f", cpu);
  Status(loaded);
  const std::string text = ReadToEnd(kJobFd);
  close(kJobFd);
  if (text.empty()) _exit(0);  // the judge went away before a job came: nothing to do
  std::vector<ShapeSetRuntime> sets;
  Doorbell* bell = nullptr;
  try {
    const json job = json::parse(text);
    const std::vector<int> cpus = job.at("cpus").get<std::vector<int>>();
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    const uint64_t bytes = job.at("file_bytes").get<uint64_t>();
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kMemFd, 0);
    if (m == MAP_FAILED) Fail(std::string("mmap: ") + std::strerror(errno));
    close(kMemFd);
    auto* base = static_cast<std::byte*>(m);
    bell = static_cast<Doorbell*>(m);
    auto span_of = [&](const json& place) {
      const BufferPlace b = BufferPlaceFromJson(place);
      if (b.data_offset() + b.bytes > bytes) throw std::runtime_error("buffer outside the file");
      return std::span<std::byte>(base + b.data_offset(), b.bytes);
    };
    const std::string source = job.at("source").get<std::string>();
    const int threads = job.at("threads").get<int>();
    for (const json& s : job.at("sets")) {
      std::vector<TensorSpec> inputs, outputs;
      for (const json& t : s.at("inputs")) inputs.push_back(TensorFromJson(t));
      for (const json& t : s.at("outputs")) outputs.push_back(TensorFromJson(t));
      std::string error;
      ShapeSetRuntime runtime;
      runtime.reference = Reference::Create(source, threads, inputs, outputs, error);
      if (!runtime.reference) Fail(error);
      for (int k = 0; k < 2; ++k) {
        std::vector<std::span<std::byte>> views;
        for (const json& place : s.at("input_buffers").at(k)) views.push_back(span_of(place));
        runtime.reference->BindInputs(k, views);
      }
      for (const json& place : s.at("output_buffers")) runtime.outputs.push_back(span_of(place));
      sets.push_back(std::move(runtime));
    }
  } catch (const std::exception& e) {
    Fail(std::string("bad job: ") + e.what());
  }
  bell->ready.store(1, std::memory_order_release);
  FutexWakeAll(&bell->ready);
  Status("ok");

  uint32_t seen = 0;
  for (;;) {
    seen = AwaitGo(*bell, seen);
    const auto op = static_cast<CallOp>(bell->op);
    if (op == CallOp::kExit) _exit(0);
    if (bell->shape_set >= sets.size() || bell->input_set > 1) Fail("call for a shape set or input set that does not exist");
    ShapeSetRuntime& set = sets[bell->shape_set];
    if (op == CallOp::kRun) {
      set.reference->ResetThreads();
      std::string error;
      if (!set.reference->Run(static_cast<int>(bell->input_set), error)) Fail(error);
    } else if (op == CallOp::kPublish) {
      set.reference->CopyOutputs(set.outputs);
    }
    SignalDone(*bell, seen);
  }
}

}  // namespace kernelgym

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--zygote") == 0) return kernelgym::RunZygote(argc, argv);
  // The reference dies with the judge (outside a PID namespace nothing else would end it).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(0);
  kernelgym::RunReference();
}
