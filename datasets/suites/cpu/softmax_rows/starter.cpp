#include <cmath>
#include <cstdint>

// Naive row softmax: three scalar passes per row (max, exp + sum, normalize).
extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        float m = xr[0];
        for (int64_t c = 1; c < C; ++c)
            if (xr[c] > m) m = xr[c];
        float sum = 0.0f;
        for (int64_t c = 0; c < C; ++c) {
            float e = std::exp(xr[c] - m);
            yr[c] = e;
            sum += e;
        }
        for (int64_t c = 0; c < C; ++c)
            yr[c] = yr[c] / sum;
    }
}
