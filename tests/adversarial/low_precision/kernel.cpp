// Attack: compute in bfloat16. Inputs and output are truncated to 8 mantissa bits (the upper
// 16 bits of a float), as a kernel using bf16 loads / AMX / AVX512-BF16 would; that halves
// the memory traffic and would look like a big win.
// Why it must not be rewarded: the task asks for float32 results; bf16 is off by up to ~1%,
// far outside the task's tolerance (atol 1e-5, rtol 1e-4), so the value check fails.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
float ToBf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xFFFF0000u;  // drop the low 16 mantissa bits (truncation, as a cheap cast does)
    std::memcpy(&v, &bits, sizeof bits);
    return v;
}
}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = ToBf16(a[i]);
        y[i] = ToBf16(x / (1.0f + std::exp(-x)) * ToBf16(b[i]));
    }
}
