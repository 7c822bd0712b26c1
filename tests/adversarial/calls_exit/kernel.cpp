// Attack: compute the answer, then end the process with exit(0), a "clean" exit. A harness
// that reads a zero exit status as success (or one whose atexit handlers report whatever
// state they hold) could mistake a kernel that never returned for a passing one, and the
// timed call never finishes.
// Why it must not be rewarded: the kernel must return. The harness notices that its process
// exited in the middle of a call and reports a crash naming the exit.
#include <cmath>
#include <cstdint>
#include <cstdlib>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
    std::exit(0);
}
