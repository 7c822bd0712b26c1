#include "tpu_runner/cpu/harness/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace kernelgym {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{};
  timespec* timeout = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
    timeout = &ts;
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, timeout, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

int FutexWakeOne(std::atomic<uint32_t>* word) {
  return static_cast<int>(syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0));
}

uint32_t AwaitGo(Doorbell& bell, uint32_t last_seen) {
  for (;;) {
    const uint32_t go = bell.go.load(std::memory_order_acquire);
    if (go != last_seen) return go;
    FutexWait(&bell.go, last_seen, -1);
  }
}

void SignalDone(Doorbell& bell, uint32_t seq) {
  bell.done.store(seq, std::memory_order_release);
  FutexWakeAll(&bell.done);
}

}  // namespace kernelgym
