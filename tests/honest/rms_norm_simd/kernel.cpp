#include <cmath>
#include <cstdint>

// RMSNorm written in portable C++: the sum of squares is an OpenMP SIMD
// reduction (lets the compiler keep vector partial sums instead of one
// serial scalar chain), and the scale pass is a plain SIMD loop.
extern "C" void kernel(const float* x, const float* w, float* y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; ++r) {
        const float* __restrict xr = x + r * C;
        float* __restrict yr = y + r * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < C; ++c)
            ss += xr[c] * xr[c];
        const float inv = 1.0f / std::sqrt(ss / (float)C + 1e-6f);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
            yr[c] = xr[c] * inv * w[c];
    }
}
