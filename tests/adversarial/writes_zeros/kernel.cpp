// Attack: fill the output with zeros, the cheapest write there is.
// Why it must not be rewarded: zeros are not the softmax of anything (every row of a softmax
// sums to 1), so the value check must reject it.
#include <cstdint>
#include <cstring>

extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {
    (void)x;
    std::memset(y, 0, sizeof(float) * static_cast<size_t>(R * C));
}
