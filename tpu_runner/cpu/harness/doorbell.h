// How the judge starts a call in another process and learns that it finished, without either
// side trusting the other's clock: a page of shared memory per side, two sequence numbers and
// futexes. The judge writes the call's parameters, bumps `go` and wakes the side; the side runs
// the call, stores `go`'s value into `done` and wakes the judge, who reads its own clock.
//
// Every process here can write the page it shares (the candidate's executor included), so the
// judge believes nothing in it but "`done` reached the number I wrote", and takes the
// candidate's outputs at the moment it sees that (Side::Ring stops the process first): a side
// that claims early is judged on the outputs it had then. The violation record is
// written by the executor's crash handlers; it can only turn a verdict into a failure.
#pragma once

#include <atomic>
#include <cstdint>

namespace kernelgym {

enum class CallOp : uint32_t {
  kRun = 1,         // compute on (shape_set, input_set); reference: keep the result
  kPublish = 2,     // reference only: copy the last result into the shared output buffers
  kExit = 3,
};

struct alignas(64) Doorbell {
  // Judge -> side. Parameters are written before `go` is bumped (release) and read after it is
  // seen (acquire).
  std::atomic<uint32_t> go{0};
  uint32_t op = 0;
  uint32_t shape_set = 0;
  uint32_t input_set = 0;
  // Side -> judge, on its own cache line so that polling one does not disturb the other.
  alignas(64) std::atomic<uint32_t> done{0};
  std::atomic<uint32_t> ready{0};  // 1 once the side has set itself up and waits for calls
  // The executor's handshake before it loads the candidate: it sets `loading` and waits for
  // `loading_ack`. What fails before the judge acknowledged is the harness's own failure; from
  // then on, candidate code may have run, and every failure is the candidate's.
  std::atomic<uint32_t> loading{0};
  std::atomic<uint32_t> loading_ack{0};
  uint32_t private_view = 0;  // set by the judge's forked child before exec: the file view is in place
  // A side's failure, written from its crash handlers before it exits (NUL-terminated ASCII
  // when written by our code; anything at all when the candidate wrote it).
  alignas(64) std::atomic<uint32_t> violation_written{0};
  char violation_kind[32] = {};
  char violation_message[200] = {};
  int64_t violation_value = 0;
};
static_assert(sizeof(Doorbell) <= 4096, "one page");

// Futex helpers on shared (not process-private) memory.
// Waits while `*word == expected`, at most `timeout_ns` (<0: forever). Returns on wake, value
// change, timeout or signal; the caller re-checks.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void FutexWakeAll(std::atomic<uint32_t>* word);
// Wakes at most one waiter; returns how many were woken (0 or 1), -1 on error.
int FutexWakeOne(std::atomic<uint32_t>* word);

// The side's loop: waits for the next `go` after `last_seen` (forever) and returns it.
uint32_t AwaitGo(Doorbell& bell, uint32_t last_seen);
// The side's reply to call `seq`.
void SignalDone(Doorbell& bell, uint32_t seq);

}  // namespace kernelgym
