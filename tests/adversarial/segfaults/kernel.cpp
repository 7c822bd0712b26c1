// Attack (or plain bug): write through a null pointer. A kernel that crashes the process must
// not take the harness, the runner or the training loop down with it.
// (The null is computed at run time from N, which the compiler cannot see, so it neither drops
// the store nor turns it into a trap instruction: the crash is a real SIGSEGV.)
// Why it must not be rewarded: the harness runs the kernel in its own process; the crash is
// reported as crashed with the signal (SIGSEGV).
#include <cstdint>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    (void)a; (void)b; (void)y;
    volatile float* p = reinterpret_cast<volatile float*>(static_cast<uintptr_t>(N >> 62));  // 0
    *p = 1.0f;
}
