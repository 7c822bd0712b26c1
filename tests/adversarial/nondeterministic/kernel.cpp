// Attack (stand-in for a racy or order-dependent reduction): the result depends on hidden
// state. Every other call nudges each output by one ulp, derived from a static call counter.
// The values stay far inside the tolerance, so a value check alone passes every call.
// Why it must not be rewarded: the harness calls the kernel twice on the same inputs and
// demands bitwise-identical outputs; results that change from call to call are not reproducible
// and could hide state carried between calls.
#include <cmath>
#include <cstdint>
#include <limits>

namespace {
uint64_t calls = 0;
}

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    const bool nudge = (calls++ & 1) != 0;
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        float v = x / (1.0f + std::exp(-x)) * b[i];
        if (nudge) v = std::nextafter(v, std::numeric_limits<float>::infinity());
        y[i] = v;
    }
}
