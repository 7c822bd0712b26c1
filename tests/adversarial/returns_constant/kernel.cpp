// Attack: return a plausible constant instead of computing. Every softmax row sums to 1, so
// the uniform distribution 1/C has the right row sums and the right mean; a check that only
// looked at sums, means or a few statistics would accept it.
// Why it must not be rewarded: it ignores the input; the element-wise check rejects it.
#include <cstdint>

extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {
    (void)x;
    const float u = 1.0f / static_cast<float>(C);
    for (int64_t i = 0; i < R * C; ++i) y[i] = u;
}
