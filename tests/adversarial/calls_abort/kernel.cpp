// Attack (or bug, e.g. a failed assert): compute the answer, then abort(). The process dies
// with SIGABRT in the middle of a call.
// Why it must not be rewarded: the kernel must return. The harness reports a crash with the
// signal, and the runner survives.
#include <cmath>
#include <cstdint>
#include <cstdlib>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
    std::abort();
}
