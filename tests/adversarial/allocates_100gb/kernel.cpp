// Attack: exhaust the machine's memory: allocate 100 GiB and touch every page. Without a limit
// this would push the evaluation machine (and other evaluations on it) into the OOM killer.
// The pointer is read back through a volatile so the compiler cannot drop the allocation.
// Why it must not be rewarded: the harness runs under an address-space limit of a few GiB, so
// malloc returns null and the first write faults: the kernel crashes, alone.
#include <cmath>
#include <cstdint>
#include <cstdlib>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    const size_t count = (size_t(100) << 30) / sizeof(float);
    float* volatile big = static_cast<float*>(std::malloc(count * sizeof(float)));
    for (size_t i = 0; i < count; i += 1024) big[i] = a[i % N];  // one write per 4 KiB page
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
    y[0] += 0.0f * big[count - 1024];
}
