// Attack: overwrite an input with zeros, then compute from it. If the harness shared its
// input buffers with the reference and ran the reference after the candidate (or reused the
// inputs), the reference would see a = 0 too, get y = silu(0) * b = 0 and agree with this
// kernel, which then only has to write zeros.
// Why it must not be rewarded: a kernel must never change its inputs. The harness maps inputs
// read-only, so the first write faults and the verdict names the input.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    float* writable_a = const_cast<float*>(a);
    std::memset(writable_a, 0, sizeof(float) * static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
}
