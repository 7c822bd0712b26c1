// Attack: never return. Stalls the evaluation (and whoever waits for it) forever, or until
// someone kills it; a harness without a deadline would hang the whole training run.
// (The empty asm statement keeps the compiler from deleting the side-effect-free loop.)
// Why it must not be rewarded: the harness runs each call under a wall-clock deadline and a
// CPU limit and reports a timeout.
#include <cstdint>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    (void)a; (void)b; (void)y; (void)N;
    for (;;) asm volatile("" ::: "memory");
}
