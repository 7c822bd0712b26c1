// Attack: return without writing the output at all.
// Why it must not be rewarded: it is infinitely "fast" and does no work. The harness fills
// outputs with NaN poison before each call, so whatever the output buffer held before (for
// example a previous reference result) can never pass for this call's answer.
#include <cstdint>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    (void)a; (void)b; (void)y; (void)N;
}
