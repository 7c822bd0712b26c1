// kernelgym-executor: the candidate's process. It holds the candidate's shared object, the
// inputs (read-only, from a sealed memfd), the output buffers and a doorbell page — nothing else
// of the evaluation: no clock that is read for the verdict, no reference, no expected outputs,
// no libtorch or BLAS, no file descriptor of the judge's. The judge (kernelgym-harness) starts
// it with the candidate's uid, CPUs and limits already applied, and these descriptors:
//   3  the plan (JSON, read to EOF): the kernel's path, where each tensor lives, each call's args
//   4  inputs memfd (sealed against writing: it can only be mapped read-only)
//   5  outputs memfd
//   6  the doorbell page
// It maps them, closes every descriptor but stdout/stderr, confines itself, loads the kernel,
// then runs calls when the judge rings. It has no way to report anything but "call N is done"
// and, when it dies, why (executor_confine.h).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpu_runner/cpu/harness/doorbell.h"
#include "tpu_runner/cpu/harness/executor_confine.h"
#include "tpu_runner/cpu/harness/kernel_call.h"
#include "tpu_runner/cpu/harness/layout.h"
#include "tpu_runner/cpu/harness/read_to_end.h"

namespace kernelgym {
namespace {

constexpr int kPlanFd = 3, kInputsFd = 4, kOutputsFd = 5, kDoorbellFd = 6;
// The arena: one range at a fixed, aligned address far below where the kernel places mappings
// (top-down from near 0x7f0000000000), so that the seccomp filter can keep memory calls off it
// with two comparisons.
constexpr uint64_t kArenaBits = 40;

Doorbell* g_bell = nullptr;

// Our own failure before any candidate code ran: recorded as "internal" so the judge does not
// blame the candidate for it.
[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "kernelgym-executor: %s\n", message.c_str());
  if (g_bell) executor::RecordViolation(g_bell, "internal", message.c_str(), 0);
  _exit(2);
}

void* Reserve(uint64_t bytes) {
  for (uint64_t slot = 0x5a; slot < 0x7a; ++slot) {
    const uint64_t want = slot << kArenaBits;
    void* p = mmap(reinterpret_cast<void*>(want), bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) continue;
    if (reinterpret_cast<uint64_t>(p) == want) return p;
    munmap(p, bytes);  // old kernels treat the flag as a hint
  }
  return nullptr;
}

}  // namespace
}  // namespace kernelgym

int main() {
  using namespace kernelgym;
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(ReadToEnd(kPlanFd));
  } catch (const std::exception& e) {
    Die(std::string("bad plan: ") + e.what());
  }
  std::vector<BufferPlace> buffers;
  std::vector<std::vector<uint64_t>> calls;
  std::string kernel_path;
  try {
    for (const auto& b : plan.at("buffers")) buffers.push_back(BufferPlaceFromJson(b));
    for (const auto& path : plan.at("kernels")) {
      kernel_path = path.get<std::string>();
      if (access(kernel_path.c_str(), R_OK) == 0) break;
    }
    for (const auto& c : plan.at("calls")) {
      std::vector<uint64_t> args;
      for (const auto& a : c) args.push_back(a.contains("b") ? a.at("b").get<uint64_t>() : a.at("v").get<uint64_t>());
      calls.push_back(std::move(args));
    }
  } catch (const std::exception& e) {
    Die(std::string("bad plan: ") + e.what());
  }

  const uint64_t page = PageSize();
  uint64_t total = 3 * page;  // leading guard, doorbell, guard
  for (const BufferPlace& b : buffers) total += b.span + page;
  auto* base = static_cast<std::byte*>(Reserve(total));
  if (!base) Die(std::string("cannot reserve the arena: ") + std::strerror(errno));
  void* bell_page = mmap(base + page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, kDoorbellFd, 0);
  if (bell_page == MAP_FAILED) Die(std::string("doorbell mmap: ") + std::strerror(errno));
  auto* bell = static_cast<Doorbell*>(bell_page);
  g_bell = bell;

  std::vector<std::byte*> data(buffers.size());
  std::vector<executor::MappedBuffer> mapped;
  uint64_t offset = 3 * page;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const BufferPlace& b = buffers[i];
    std::byte* where = base + offset;
    void* m = mmap(where, b.span, b.input ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   b.input ? kInputsFd : kOutputsFd, static_cast<off_t>(b.file_offset));
    if (m == MAP_FAILED) Die("mmap of " + b.name + ": " + std::strerror(errno));
    data[i] = where + b.lead;
    const uint64_t lo = reinterpret_cast<uint64_t>(where);
    mapped.push_back({buffers[i].name.c_str(), lo, lo + b.span, lo + b.span + page, b.input});
    offset += b.span + page;
  }
  // From here on the process holds no descriptor but stdin/stdout/stderr.
  close_range(3, ~0U, 0);

  std::vector<std::vector<uint64_t>> args(calls.size());
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const auto& spec = plan["calls"][c];
    for (std::size_t a = 0; a < spec.size(); ++a)
      args[c].push_back(spec[a].contains("b") ? reinterpret_cast<uint64_t>(data.at(calls[c][a])) : calls[c][a]);
  }
  plan = nullptr;

  executor::InstallCrashReporters(bell, mapped);
  std::string error;
  if (!executor::InstallAllowList(reinterpret_cast<uint64_t>(base), total, error)) Die(error);
  bell->loading.store(1, std::memory_order_release);
  FutexWakeAll(&bell->loading);
  while (bell->loading_ack.load(std::memory_order_acquire) == 0) FutexWait(&bell->loading_ack, 0, -1);
  void* handle = dlopen(kernel_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    executor::RecordViolation(bell, "load", why ? why : "dlopen failed", 0);
    _exit(106);
  }
  void* kernel = dlsym(handle, "kernel");
  if (!kernel) {
    executor::RecordViolation(bell, "load", "the shared object has no `kernel`", 0);
    _exit(106);
  }

  bell->ready.store(1, std::memory_order_release);
  FutexWakeAll(&bell->ready);
  uint32_t seen = 0;
  for (;;) {
    seen = AwaitGo(*bell, seen);
    const auto op = static_cast<CallOp>(bell->op);
    if (op == CallOp::kExit) _exit(0);
    const std::size_t call = static_cast<std::size_t>(bell->shape_set) * 2 + bell->input_set;
    if (op == CallOp::kRun && call < args.size()) CallKernel(kernel, args[call]);
    SignalDone(*bell, seen);
  }
}
